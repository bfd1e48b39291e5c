"""Licence-use enforcement, the licence audit, cost arithmetic, quotes and budgets."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import psycopg
import pytest

from tests.chaos.conftest import db_rows
from tests.conftest import SAMPLES, TEST_ENV, TMP_ROOT, make_client_key, wait_for_job
from tests.support import services
from tests.support.gpu_double_app import DEVICE_SECONDS_PER_PAGE

GPU_PRICE_USD_PER_HOUR = Decimal("0.80")  # an L4, say
LICENCE_REFERENCE = "JINA-COMMERCIAL-2026-0042"


def gpu_worker(name: str, queues: list[str], **env: str) -> subprocess.Popen[bytes]:
    prefix = TEST_ENV["PAGEMILL_QUEUE_PREFIX"]
    return services.start_worker(
        {
            **os.environ,
            "PAGEMILL_DEVICE_KIND": "nvidia-l4",
            "PAGEMILL_DEVICE_PRICE_USD_PER_HOUR": str(GPU_PRICE_USD_PER_HOUR),
            **env,
        },
        TMP_ROOT / f"{name}.log",
        ",".join(f"{prefix}{queue}" for queue in queues),
        concurrency=4,
        pool="threads",
        app="tests.support.gpu_double_app",
    )


@pytest.fixture()
def admin_api(api_url: str, db: str) -> Iterator[httpx.Client]:
    key = make_client_key(admin=True)
    with httpx.Client(
        base_url=api_url, headers={"Authorization": f"Bearer {key}"}, timeout=60
    ) as client:
        yield client


@pytest.fixture()
def gpu_workers(db: str, worker_process: Any) -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        services.stop(process)


def live_worker_ids(engine: str) -> list[str]:
    rows = db_rows(
        "SELECT id FROM workers WHERE engine = %s AND stopped_at IS NULL "
        "AND heartbeat_at > now() - interval '30 seconds'",
        engine,
    )
    return [row[0] for row in rows]


def submit(api: httpx.Client, **data: str) -> httpx.Response:
    path = SAMPLES / "scanned-sentence.pdf"
    with path.open("rb") as handle:
        return api.post("/v1/jobs", files={"file": (path.name, handle)}, data=data)


def test_commercial_jobs_run_only_on_a_licensed_basis(
    api: httpx.Client, gpu_workers: list[subprocess.Popen[bytes]], admin_api: httpx.Client
) -> None:
    gpu_workers.append(gpu_worker("gpu-noncommercial", ["ocr-gpu"]))
    services.wait_until(lambda: len(live_worker_ids("vllm")) == 1, 30, "GPU registration")
    [noncommercial_worker] = live_worker_ids("vllm")

    refused = submit(api, engine="vllm", license_use="commercial")
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["code"] == "no_licensed_worker"
    assert "commercial" in refused.json()["error"]["message"]

    allowed = submit(api, engine="vllm", license_use="non_commercial")
    assert allowed.status_code == 202
    job = wait_for_job(api, allowed.json()["id"])
    assert job["status"] == "succeeded", job
    [page] = job["page_details"]
    assert page["worker_id"] == noncommercial_worker
    assert page["licence"] == {
        "use": "non_commercial",
        "model": "jina-ocr-v1",
        "model_license": "CC-BY-NC-4.0",
        "deployment_license_reference": None,
        "permits_commercial": False,
    }

    gpu_workers.append(
        gpu_worker(
            "gpu-licensed",
            ["ocr-gpu", "ocr-gpu-commercial"],
            PAGEMILL_COMMERCIAL_LICENSE_REFERENCE=LICENCE_REFERENCE,
        )
    )
    services.wait_until(lambda: len(live_worker_ids("vllm")) == 2, 30, "licensed registration")
    [licensed_worker] = [w for w in live_worker_ids("vllm") if w != noncommercial_worker]
    accepted = submit(api, engine="vllm", license_use="commercial")
    assert accepted.status_code == 202, accepted.text
    job = wait_for_job(api, accepted.json()["id"])
    assert job["status"] == "succeeded", job
    [page] = job["page_details"]
    assert page["worker_id"] == licensed_worker
    assert page["licence"]["deployment_license_reference"] == LICENCE_REFERENCE
    assert page["licence"]["permits_commercial"] is True

    audit = admin_api.get("/v1/ops/licence-audit").json()
    rows = audit["rows"] if isinstance(audit, dict) else audit
    commercial = [row for row in rows if row["license_use"] == "commercial"]
    assert len(commercial) == 1
    assert commercial[0]["deployment_license_reference"] == LICENCE_REFERENCE
    assert commercial[0]["model_license"] == "CC-BY-NC-4.0"
    assert int(commercial[0]["pages"]) == 1


def test_unlicensed_worker_refuses_the_commercial_queue(gpu_workers: Any) -> None:
    prefix = TEST_ENV["PAGEMILL_QUEUE_PREFIX"]
    log = TMP_ROOT / "gpu-refused.log"
    process = services.start_worker(
        dict(os.environ),
        log,
        f"{prefix}ocr-gpu,{prefix}ocr-gpu-commercial",
        pool="threads",
        app="tests.support.gpu_double_app",
        wait=False,
    )
    assert process.wait(120) == 78
    assert "refusing to start" in log.read_text()


def test_database_refuses_a_commercial_page_on_a_noncommercial_basis(
    api: httpx.Client, worker_process: Any
) -> None:
    job = wait_for_job(api, submit(api).json()["id"])
    url = TEST_ENV["PAGEMILL_DATABASE_URL"].replace("+psycopg", "")
    with psycopg.connect(url) as conn, pytest.raises(psycopg.errors.CheckViolation):
        conn.execute(
            "UPDATE pages SET license_use = 'commercial', basis_permits_commercial = false, "
            "model_license = 'CC-BY-NC-4.0' WHERE job_id = %s",
            (job["id"],),
        )


def test_cost_is_device_seconds_times_price(api: httpx.Client, worker_process: Any) -> None:
    job = wait_for_job(api, submit(api, engine="rapidocr").json()["id"])
    assert job["status"] == "succeeded"
    rows = db_rows(
        "SELECT device_seconds, cost_usd, price_usd_per_hour, device_kind FROM pages "
        "WHERE job_id = %s",
        job["id"],
    )
    total = Decimal(0)
    for seconds, cost, price, device in rows:
        assert price == Decimal("3.6") and device == "cpu"
        expected = (Decimal(str(seconds)) * price / 3600).quantize(Decimal("0.00000001"))
        assert cost == expected
        total += cost
    assert Decimal(job["cost_usd"]) == total
    assert job["usage"]["device_seconds"] == pytest.approx(sum(r[0] for r in rows))
    [(worker_id,)] = db_rows("SELECT worker_id FROM pages WHERE job_id = %s", job["id"])
    services.wait_until(
        lambda: bool(db_rows("SELECT 1 FROM workers WHERE id = %s", worker_id)),
        10,
        "the worker that ran the page in the registry",
    )


def test_gpu_usage_and_acceptance_reach_the_job(
    api: httpx.Client, gpu_workers: list[subprocess.Popen[bytes]]
) -> None:
    gpu_workers.append(gpu_worker("gpu-usage", ["ocr-gpu"]))
    job = wait_for_job(api, submit(api, engine="vllm").json()["id"])
    assert job["status"] == "succeeded", job
    usage = job["usage"]
    assert usage["output_tokens"] == 1085 and usage["prompt_tokens"] == 300
    assert usage["spec_draft_tokens"] == 1188 and usage["spec_accepted_tokens"] == 684
    assert usage["acceptance_rate"] == pytest.approx(684 / 1188)
    assert Decimal(job["cost_usd"]) == (
        Decimal(str(DEVICE_SECONDS_PER_PAGE)) * GPU_PRICE_USD_PER_HOUR / 3600
    ).quantize(Decimal("0.00000001"))


def test_quote_and_budget(api: httpx.Client, worker_process: Any) -> None:
    # No history yet: the quote uses the fallback of 5 device seconds a page at 3.60 USD/h.
    first = submit(api, engine="rapidocr")
    assert Decimal(first.json()["quote_usd"]) == Decimal("0.00500000")
    wait_for_job(api, first.json()["id"])
    [(mean,)] = db_rows(
        "SELECT avg(cost_usd) FROM pages WHERE engine = 'rapidocr' AND status = 'succeeded'"
    )
    path = SAMPLES / "invoice-multipage.pdf"
    with path.open("rb") as handle:
        over = api.post(
            "/v1/jobs",
            files={"file": (path.name, handle)},
            data={"engine": "rapidocr", "max_cost_usd": str(mean * 3 / 2)},
        )
    assert over.status_code == 422, over.text
    error = over.json()["error"]
    assert error["code"] == "over_budget"
    quote = (mean * 3).quantize(Decimal("0.00000001"))
    assert f"${quote:.6f}" in error["message"]
    with path.open("rb") as handle:
        within = api.post(
            "/v1/jobs",
            files={"file": (path.name, handle)},
            data={"engine": "rapidocr", "max_cost_usd": str(mean * 4)},
        )
    assert within.status_code == 202
    assert Decimal(within.json()["quote_usd"]) == quote
    assert Decimal(within.json()["max_cost_usd"]) == mean * 4
