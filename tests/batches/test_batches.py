"""Batches through the real API, a real worker, Redis, Postgres and S3, with an engine
that answers at once (tests/support/instant_app.py): what is measured is the service."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pymupdf
import pytest

from pagemill.storage import ObjectStore
from tests.cli import test_client_and_submit as cli_tests
from tests.conftest import RUN_ID, TEST_ENV, TMP_ROOT, make_client_key
from tests.support import services
from tests.support.instant_engine import DEVICE_SECONDS_PER_PAGE
from tests.webhooks.receiver import Receiver, running_receiver

BATCH_SIZE = 1000
# The engine's part of a page's cost at the tests' 3.60 USD a device-hour; a page is
# also charged the CPU spent finding which way up it is (worker/stages/quality.py), so
# it costs at least this.
ENGINE_COST_USD = Decimal(str(DEVICE_SECONDS_PER_PAGE)) * Decimal("3.6") / 3600


@pytest.fixture(scope="module")
def batch_api_url(database_url: str, redis_client: Any, s3: ObjectStore) -> Iterator[str]:
    """An API and a worker of their own (own queues), the worker with the instant engine."""
    port = services.free_port()
    prefix = f"t{RUN_ID}batch-"
    env = {
        **os.environ,
        "PAGEMILL_QUEUE_PREFIX": prefix,
        "PAGEMILL_API_BASE_URL": f"http://127.0.0.1:{port}",
    }
    api = services.launch_api(env, TMP_ROOT / "batch-api.log", port)
    queues = ",".join(f"{prefix}{stage}" for stage in ("prepare", "ocr", "finalize", "webhooks"))
    worker = services.start_worker(
        env, TMP_ROOT / "batch-worker.log", queues, concurrency=3, app="tests.support.instant_app"
    )
    services.wait_for_api(api, TMP_ROOT / "batch-api.log", port)
    yield f"http://127.0.0.1:{port}"
    services.stop(worker)
    services.stop(api)


@pytest.fixture()
def batch_api(batch_api_url: str, db: str) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {make_client_key()}"}
    with httpx.Client(base_url=batch_api_url, headers=headers, timeout=120) as client:
        yield client


def one_page_pdf(number: int) -> bytes:
    """A born-digital page, different for every number (no two documents alike)."""
    document = pymupdf.open()
    page = document.new_page()
    text = f"Document {number}. " + "An invoice line with a description and an amount. " * 8
    page.insert_textbox(pymupdf.Rect(72, 72, 520, 700), text, fontsize=11)
    data: bytes = document.tobytes()
    document.close()
    return data


def sql(query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(TEST_ENV["PAGEMILL_DATABASE_URL"].replace("+psycopg", "")) as conn:
        return conn.execute(query, params).fetchall()


def wait_for_batch(client: httpx.Client, batch_id: str, timeout_s: float = 600) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        batch: dict[str, Any] = client.get(f"/v1/batches/{batch_id}").json()
        if batch["status"] == "completed":
            return batch
        time.sleep(1)
    raise TimeoutError(f"batch {batch_id}: {batch['jobs']} after {timeout_s} s")


def events(receiver: Receiver, count: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = [json.loads(r.body) for r in receiver.wait_for(count)]
    return found


def test_a_thousand_documents_end_and_add_up(batch_api: httpx.Client) -> None:
    files = [
        ("file", (f"invoice-{number}.pdf", one_page_pdf(number), "application/pdf"))
        for number in range(BATCH_SIZE)
    ]
    with running_receiver() as receiver:
        # Every upload is inspected before the answer: on a busy machine that takes a while.
        response = batch_api.post(
            "/v1/batches", files=files, data={"webhook_url": receiver.url()}, timeout=900
        )
        assert response.status_code == 202, response.text[:2000]
        submitted = response.json()
        assert submitted["documents"] == len(submitted["job_ids"]) == BATCH_SIZE
        assert submitted["jobs"]["by_status"] == {"queued": BATCH_SIZE}

        batch = wait_for_batch(batch_api, submitted["id"])
        # One event for the batch, and none per job (job_webhooks was not asked for).
        [event] = events(receiver, 1)
        time.sleep(1)
        assert len(receiver.requests) == 1

    assert batch["jobs"] == {
        "total": BATCH_SIZE,
        "ended": BATCH_SIZE,
        "by_status": {"succeeded": BATCH_SIZE},
    }
    assert batch["job_ids"] == submitted["job_ids"]
    # The database agrees: every job terminal, one succeeded page each, the same cost.
    [(jobs, pages, cost, unfinished)] = sql(
        "SELECT count(DISTINCT jobs.id), count(pages.id), sum(pages.cost_usd),"
        " count(*) FILTER (WHERE jobs.status IN ('queued', 'running'))"
        " FROM jobs JOIN pages ON pages.job_id = jobs.id"
        " WHERE jobs.batch_id = %s AND pages.status = 'succeeded'",
        submitted["id"],
    )
    assert (jobs, pages, unfinished) == (BATCH_SIZE, BATCH_SIZE, 0)
    # The batch's cost is what its pages recorded, to the last digit, in the API and in
    # the event; every page paid at least the engine's fixed device time.
    assert Decimal(str(batch["cost_usd"])) == cost >= BATCH_SIZE * ENGINE_COST_USD
    [(cheapest,)] = sql(
        "SELECT min(pages.device_seconds) FROM pages JOIN jobs ON jobs.id = pages.job_id"
        " WHERE jobs.batch_id = %s",
        submitted["id"],
    )
    assert cheapest >= DEVICE_SECONDS_PER_PAGE
    assert event["type"] == "batch.completed"
    assert event["data"]["batch_id"] == submitted["id"]
    assert event["data"]["jobs"] == {"succeeded": BATCH_SIZE}
    assert Decimal(event["data"]["cost_usd"]) == cost
    # The first job's own result is there, in the order the documents were sent.
    first = batch_api.get(f"/v1/jobs/{submitted['job_ids'][0]}").json()
    assert first["source"]["filename"] == "invoice-0.pdf"
    assert first["batch_id"] == submitted["id"]


def test_a_batch_with_an_unusable_document_is_refused_whole(
    batch_api: httpx.Client, s3: ObjectStore
) -> None:
    before = {item.object_name for item in s3._client.list_objects(s3.bucket, "jobs/", True)}
    response = batch_api.post(
        "/v1/batches",
        files=[
            ("file", ("good.pdf", one_page_pdf(1), "application/pdf")),
            ("file", ("notes.pdf", b"plain text, not a PDF\n" * 50, "application/pdf")),
        ],
        data={"source_url": ["http://127.0.0.1/a.pdf", "https://127.0.0.1/b.pdf"]},
    )
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "batch_rejected"
    assert "2 of the batch's 4 documents" in error["message"]
    assert [(item["index"], item["name"], item["code"]) for item in error["items"]] == [
        (1, "notes.pdf", "unsupported_type"),
        (2, "http://127.0.0.1/a.pdf", "source_url_scheme_not_allowed"),
    ]
    assert sql("SELECT count(*) FROM jobs") == [(0,)]
    assert sql("SELECT count(*) FROM batches") == [(0,)]
    after = {item.object_name for item in s3._client.list_objects(s3.bucket, "jobs/", True)}
    assert after == before


@pytest.mark.parametrize(
    ("data", "code"),
    [
        ({}, "no_document"),
        ({"source_url": [f"https://127.0.0.1/{n}.pdf" for n in range(1001)]}, "too_many_documents"),
        (
            {"source_url": "https://127.0.0.1/a.pdf", "webhook_url": "ftp://x"},
            "invalid_webhook_url",
        ),
        # Once a 500: a Decimal NaN cannot be compared with the bounds.
        ({"source_url": "https://127.0.0.1/a.pdf", "max_cost_usd": "NaN"}, "invalid_request"),
        ({"source_url": "https://127.0.0.1/a.pdf", "max_cost_usd": "sNaN"}, "invalid_request"),
    ],
)
def test_a_batch_that_cannot_be_read_is_refused(
    batch_api: httpx.Client, data: dict[str, Any], code: str
) -> None:
    response = batch_api.post("/v1/batches", data=data)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == code
    assert sql("SELECT count(*) FROM jobs") == [(0,)]


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        (
            "license_use",
            "comercial",
            "license_use: Input should be 'non_commercial' or 'commercial'",
        ),
        ("max_cost_usd", "five", "max_cost_usd: Input should be a valid decimal"),
        ("max_cost_usd", "NaN", "max_cost_usd: Input should be a finite number"),
        ("max_cost_usd", "-1", "max_cost_usd: Input should be greater than or equal to 0"),
        ("engine", "magic", "The engine must be one of auto, "),
    ],
)
def test_a_mistyped_option_is_refused_by_name_as_a_single_job_is(
    batch_api: httpx.Client, field: str, value: str, says: str
) -> None:
    """Once one sentence about license_use and max_cost_usd together, whichever was
    wrong; and an unknown engine was reported once per document."""
    urls = ["https://127.0.0.1/a.pdf", "https://127.0.0.1/b.pdf"]
    batch = batch_api.post("/v1/batches", data={"source_url": urls, field: value})
    assert batch.status_code == 422, batch.text
    error = batch.json()["error"]
    assert says in error["message"], error
    other = {"license_use", "max_cost_usd"} - {field}
    assert not any(name in error["message"] for name in other), error
    # The same code and sentence as POST /v1/jobs gives for the same field.
    single = batch_api.post("/v1/jobs", data={"source_url": urls[0], field: value})
    assert single.status_code == 422, single.text
    assert error == single.json()["error"]
    assert sql("SELECT count(*) FROM jobs") == [(0,)]


def test_a_source_url_that_cannot_be_stored_is_refused_in_place(
    batch_api: httpx.Client,
) -> None:
    """A NUL in an s3 source_url was once a 500 from the database, after the check."""
    bucket = TEST_ENV["PAGEMILL_SOURCE_READABLE_BUCKETS"]
    urls = ["https://127.0.0.1/a.pdf", f"s3://{bucket}/a\x00.pdf"]
    response = batch_api.post("/v1/batches", data={"source_url": urls})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "batch_rejected"
    assert [(item["index"], item["code"]) for item in error["items"]] == [(1, "invalid_source_url")]
    assert sql("SELECT count(*) FROM jobs") == [(0,)]
    assert sql("SELECT count(*) FROM batches") == [(0,)]


def test_job_events_beside_the_batch_event_and_privacy(
    batch_api: httpx.Client, batch_api_url: str
) -> None:
    files = [("file", (f"{n}.pdf", one_page_pdf(n), "application/pdf")) for n in range(2)]
    with running_receiver() as receiver:
        data = {"webhook_url": receiver.url(), "job_webhooks": "true", "pages": "1"}
        submitted = batch_api.post("/v1/batches", files=files, data=data).json()
        wait_for_batch(batch_api, submitted["id"])
        types = sorted(event["type"] for event in events(receiver, 3))
    assert types == ["batch.completed", "job.succeeded", "job.succeeded"]
    other = {"Authorization": f"Bearer {make_client_key()}"}
    response = httpx.get(f"{batch_api_url}/v1/batches/{submitted['id']}", headers=other)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "batch_not_found"


def test_submit_a_folder_from_the_command_line(
    batch_api: httpx.Client, batch_api_url: str, tmp_path: Path
) -> None:
    for number in range(3):
        (tmp_path / f"{number}.pdf").write_bytes(one_page_pdf(number))
    (tmp_path / "notes.txt").write_text("not a document; left out by its suffix")
    key = batch_api.headers["Authorization"].removeprefix("Bearer ")
    env = {"PAGEMILL_API_BASE_URL": batch_api_url, "PAGEMILL_API_KEY": key}
    submitted = cli_tests.pagemill("submit", str(tmp_path), env=env)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    assert "3 documents" in submitted.stdout and "3 succeeded" in submitted.stdout
    (tmp_path / "bad.pdf").write_text("plain text under a PDF's name")
    refused = cli_tests.pagemill("submit", str(tmp_path), env=env)
    assert refused.returncode == 1
    assert "batch_rejected" in refused.stdout and "bad.pdf" in refused.stdout
