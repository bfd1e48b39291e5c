"""Postgres round trips per page on the OCR path, counted inside a real API and a real
worker (bench/roundtrips.py: statements, BEGIN, COMMIT or ROLLBACK, pool pings).

A page read by OCR costs one statement to record in prepare, one to claim and one to
finish (its result, its worker's charge, the purge fence and whether the job is done):
with the job's own statements spread over its pages, at most eight a page. More would
multiply across many GPU hosts; this keeps the count from creeping back up.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis

from bench import roundtrips
from bench.common import make_text_pdf
from tests.conftest import RUN_ID, TEST_ENV, TMP_ROOT, make_client_key
from tests.support import services

pytestmark = pytest.mark.timeout(300)

PAGES = 25  # as many as each job of the orchestration benchmark
MAX_PER_PAGE = 8.0
# The OCR task alone: the claim and the finish, one statement each (2), a ping before
# either where its pooled connection sat idle over a second (pagemill.db.session), and
# a recount for the job's last few pages.
MAX_OCR_TASK_PER_PAGE = 3.0
KEY = f"t{RUN_ID}-roundtrips"
# A page's work: the API's submission, then the worker's three tasks.
STAGES = ("api", "prepare", "ocr_page", "finalize")


@pytest.fixture(scope="module")
def counted(database_url: str, redis_client: Any, s3: Any) -> Iterator[str]:
    """An API and a worker of their own (own queues), counting their round trips; the
    worker runs the instant engine under the name `rapidocr` (bench/instant_app.py)."""
    port = services.free_port()
    prefix = f"t{RUN_ID}rt-"
    env = {
        **os.environ,
        "PAGEMILL_QUEUE_PREFIX": prefix,
        "PAGEMILL_API_BASE_URL": f"http://127.0.0.1:{port}",
        roundtrips.KEY_ENV: KEY,
    }
    api_log = TMP_ROOT / "roundtrips-api.log"
    api = roundtrips.launch_counted_api(env, api_log, port)
    queues = ",".join(f"{prefix}{stage}" for stage in ("prepare", "ocr", "finalize"))
    worker = services.start_worker(
        env, TMP_ROOT / "roundtrips-worker.log", queues, concurrency=2, app="bench.instant_app"
    )
    try:
        services.wait_for_api(api, api_log, port)
        yield f"http://127.0.0.1:{port}"
    finally:
        services.stop(worker)
        services.stop(api)


def test_an_ocr_page_costs_at_most_eight_round_trips(counted: str, db: str, tmp_path: Path) -> None:
    counts = redis.Redis.from_url(TEST_ENV["PAGEMILL_BROKER_URL"])
    pdf = make_text_pdf(tmp_path / "pages.pdf", PAGES).read_bytes()
    headers = {"Authorization": f"Bearer {make_client_key()}"}
    with httpx.Client(base_url=counted, headers=headers, timeout=60) as client:
        # The first job opens each process's connections (a few round trips each, once).
        _run_job(client, pdf)
        # Each process adds its counts within a flush period: the first job's, then none.
        time.sleep(2 * roundtrips.FLUSH_PERIOD_S)
        counts.delete(KEY)
        _run_job(client, pdf)
    counted_now = _counts_once_finalized(counts)

    by_stage = _per_page_by_stage(counted_now)
    assert set(by_stage) >= set(STAGES), counted_now
    # Counted, not merely absent: every page was claimed and finished by a statement.
    assert by_stage["ocr_page"] >= 2.0, counted_now
    assert by_stage["ocr_page"] <= MAX_OCR_TASK_PER_PAGE, counted_now
    assert sum(by_stage[stage] for stage in STAGES) <= MAX_PER_PAGE, counted_now


def _run_job(client: httpx.Client, pdf: bytes) -> None:
    # Bytes of its own: the same document again would be answered from the result cache.
    unique = pdf + f"\n%{uuid.uuid4().hex}\n".encode()
    response = client.post(
        "/v1/jobs",
        files={"file": ("pages.pdf", unique, "application/pdf")},
        data={"engine": "rapidocr"},
    )
    assert response.status_code in (200, 201, 202), response.text
    job_id = response.json()["id"]
    # Waited for in Postgres, not through the API, whose round trips are being counted.
    url = TEST_ENV["PAGEMILL_DATABASE_URL"].replace("+psycopg", "")
    deadline = time.monotonic() + 180
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT status::text, pages_total FROM jobs WHERE id = %s", (job_id,)
            ).fetchone()
            if row is not None and row[0] in ("succeeded", "failed", "cancelled"):
                assert row == ("succeeded", PAGES)
                return
            time.sleep(0.1)
    raise TimeoutError(f"job {job_id} unfinished")


def _counts_once_finalized(counts: redis.Redis) -> dict[str, int]:
    # Each process adds its counts within a flush period of a task's end; once the
    # finalize task's are in, one more period lets the other process's last arrive.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if int(counts.hget(KEY, "runs|finalize") or 0) >= 1:  # type: ignore[arg-type]
            time.sleep(2 * roundtrips.FLUSH_PERIOD_S)
            raw: dict[bytes, bytes] = counts.hgetall(KEY)  # type: ignore[assignment]
            return {key.decode(): int(value) for key, value in raw.items()}
        time.sleep(0.1)
    raise TimeoutError(f"the finalize task never reported its counts: {counts.hgetall(KEY)}")


def _per_page_by_stage(counted: dict[str, int]) -> dict[str, float]:
    stages: dict[str, float] = {}
    for field, value in counted.items():
        kind, _, rest = field.partition("|")
        if kind == "rt":
            stage = rest.split("|", 1)[0]
            stages[stage] = stages.get(stage, 0.0) + value / PAGES
    return stages
