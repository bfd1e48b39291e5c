"""A small, hand-computed world for the ops views and /metrics.

Two clients; six jobs; eleven pages (succeeded on three bases, one failed, one
cancelled, one running, one queued); three workers (live, stopped, silent).
Nothing here is picked up by a reaper that may run in the same test session: the
queued job is fresh, and the running page holds a lease.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import httpx
import psycopg
import pytest
import redis

from pagemill.domain import JobStatus, LicenseUse, PageStatus, SourceKind
from tests.conftest import TEST_ENV, TMP_ROOT
from tests.support import services

D1 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
D2 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

RAPIDOCR = {"model": "rapidocr-3.10.0", "model_license": "Apache-2.0"}
JINA = {"model": "jina-ocr-v1", "model_license": "CC-BY-NC-4.0"}
JINA_REFERENCE = "JINA-COMM-2026-001"

# The ops API runs with its own queue prefix, so no worker of the test session
# consumes the messages the queue-depth test leaves in Redis.
OPS_QUEUE_PREFIX = f"{TEST_ENV['PAGEMILL_QUEUE_PREFIX']}ops-"
# Its sessions' name in pg_stat_activity: the test session's other processes (a
# worker's reaper) share the database and may wait on the same locks.
OPS_API_NAME = "pagemill-ops-api"


def sql(query: str, *params: Any) -> list[tuple[Any, ...]]:
    url = TEST_ENV["PAGEMILL_DATABASE_URL"].replace("+psycopg", "")
    with psycopg.connect(url) as conn:
        cursor = conn.execute(query, params)
        return cursor.fetchall() if cursor.description else []


@dataclass(frozen=True)
class OpsWorld:
    now: datetime
    stuck_job: uuid.UUID
    fresh_job: uuid.UUID
    worker_ids: tuple[str, ...]


@pytest.fixture()
def ops_world(db: str) -> OpsWorld:
    from pagemill.clients.repository import create_client
    from pagemill.db.models import Job, Page, Worker
    from pagemill.db.session import session_scope

    sql("TRUNCATE workers")
    now = datetime.now(UTC)
    with session_scope() as session:
        acme, _ = create_client(session, "acme")
        globex, _ = create_client(session, "globex")

        def job(client_id: uuid.UUID, status: JobStatus, pages_total: int, **extra: Any) -> Job:
            found = Job(
                client_id=client_id,
                status=status,
                license_use=extra.pop("license_use", LicenseUse.non_commercial),
                engine="auto",
                source_kind=SourceKind.pdf,
                source_bytes=1000,
                source_sha256="0" * 64,
                document_pages=pages_total,
                pages_total=pages_total,
                **extra,
            )
            session.add(found)
            session.flush()
            return found

        j1 = job(acme.id, JobStatus.succeeded, 3)
        j2 = job(acme.id, JobStatus.succeeded, 1)
        j3 = job(
            acme.id,
            JobStatus.running,
            2,
            created_at=now - timedelta(minutes=30),
            updated_at=now - timedelta(minutes=20),
            started_at=now - timedelta(minutes=29),
        )
        j4 = job(
            acme.id,
            JobStatus.queued,
            1,
            created_at=now - timedelta(minutes=1),
            updated_at=now - timedelta(minutes=1),
        )
        j5 = job(globex.id, JobStatus.failed, 2)
        j6 = job(globex.id, JobStatus.succeeded, 2, license_use=LicenseUse.commercial)

        def page(
            job: Job,
            number: int,
            status: PageStatus,
            engine: str | None = None,
            device_kind: str | None = None,
            seconds: tuple[float, float] | None = None,  # wall, device
            price: str | None = None,
            cost: str | None = None,
            finished_at: datetime | None = None,
            basis: dict[str, Any] | None = None,
            **extra: Any,
        ) -> None:
            wall, device = seconds or (None, None)
            session.add(
                Page(
                    job_id=job.id,
                    number=number,
                    status=status,
                    engine=engine,
                    device_kind=device_kind,
                    wall_seconds=wall,
                    device_seconds=device,
                    price_usd_per_hour=Decimal(price) if price else None,
                    cost_usd=Decimal(cost) if cost else None,
                    finished_at=finished_at,
                    license_use=job.license_use if engine else None,
                    **(basis or {}),
                    **extra,
                )
            )

        cpu = {**RAPIDOCR, "basis_permits_commercial": True}
        nc_only = {**JINA, "basis_permits_commercial": False}
        licensed = {**JINA, "basis_permits_commercial": True}
        licensed["deployment_license_reference"] = JINA_REFERENCE
        ok, failed = PageStatus.succeeded, PageStatus.failed
        # cost = device seconds x price per hour / 3600
        page(j1, 1, ok, "rapidocr", "cpu", (2.0, 2.0), "0.36", "0.0002", D1, cpu)
        page(j1, 2, ok, "rapidocr", "cpu", (3.0, 3.0), "0.36", "0.0003", D1, cpu)
        page(
            j1, 3, ok, "vllm", "nvidia-l4", (1.2, 0.5), "0.72", "0.0001", D1, nc_only,
            output_tokens=800, spec_draft_tokens=400, spec_accepted_tokens=300,
        )  # fmt: skip
        page(
            j2, 1, ok, "vllm", "nvidia-l4", (0.9, 0.25), "0.72", "0.00005", D2, nc_only,
            output_tokens=600, spec_draft_tokens=200, spec_accepted_tokens=100,
        )  # fmt: skip
        page(
            j6, 1, ok, "vllm", "nvidia-a100-40gb", (0.6, 0.3), "1.44", "0.00012", D2, licensed,
            output_tokens=500, spec_draft_tokens=100, spec_accepted_tokens=80,
        )  # fmt: skip
        page(
            j6, 2, ok, "vllm", "nvidia-a100-40gb", (0.8, 0.2), "1.44", "0.00008", D2, licensed,
            output_tokens=700, spec_draft_tokens=300, spec_accepted_tokens=270,
        )  # fmt: skip
        page(j5, 1, failed, "rapidocr", "cpu", (1.5, 1.0), "0.36", "0.0001", D2, cpu)
        page(j5, 2, PageStatus.cancelled)
        # The running job: one page done, one running; nothing moved for 15 minutes.
        quiet = {"updated_at": now - timedelta(minutes=15)}
        page(j3, 1, ok, "rapidocr", "cpu", (4.0, 4.0), "0.36", "0.0004", D2, cpu, **quiet)
        page(
            j3, 2, PageStatus.running, "rapidocr", "cpu",
            lease_expires_at=now + timedelta(hours=1), **quiet,
        )  # fmt: skip
        page(j4, 1, PageStatus.queued, updated_at=now - timedelta(minutes=1))

        def worker(
            worker_id: str,
            device_kind: str,
            device_count: int,
            price: str,
            started_at: datetime,
            heartbeat_at: datetime,
            stopped_at: datetime | None,
            busy_seconds: float,
            pages_done: int,
            model: dict[str, str],
        ) -> None:
            session.add(
                Worker(
                    id=worker_id,
                    host=f"{worker_id}.example",
                    pid=100,
                    queues=["ocr"],
                    device_kind=device_kind,
                    device_count=device_count,
                    price_usd_per_hour=Decimal(price),
                    engine="rapidocr" if device_kind == "cpu" else "vllm",
                    model_permits_commercial=model is RAPIDOCR,
                    deployment_license_reference=None,
                    versions={"pagemill": "0.1.0"},
                    started_at=started_at,
                    heartbeat_at=heartbeat_at,
                    stopped_at=stopped_at,
                    busy_seconds=busy_seconds,
                    pages_done=pages_done,
                    **model,
                )
            )

        beat = now - timedelta(seconds=10)
        stopped = now - timedelta(days=1)
        silent = now - timedelta(minutes=5)
        # span x devices: 3600 s; busy 1800 s; 3600 pages at 0.72 $/h
        worker("ops-gpu-live", "nvidia-l4", 1, "0.72", beat - timedelta(hours=1), beat, None,
               1800.0, 3600, JINA)  # fmt: skip
        # span x devices: 7200 s x 2; busy 3600 s; 1200 pages at 0.36 $/h
        worker("ops-cpu-stopped", "cpu", 2, "0.36", stopped - timedelta(hours=2), stopped,
               stopped, 3600.0, 1200, RAPIDOCR)  # fmt: skip
        # span 600 s, no page yet, silent for 5 minutes
        worker("ops-gpu-silent", "nvidia-a100-40gb", 1, "1.44", silent - timedelta(minutes=10),
               silent, None, 0.0, 0, JINA)  # fmt: skip
    return OpsWorld(
        now=now,
        stuck_job=j3.id,
        fresh_job=j4.id,
        worker_ids=("ops-gpu-silent", "ops-gpu-live", "ops-cpu-stopped"),
    )


@pytest.fixture(scope="session")
def ops_api_url(database_url: str, redis_client: redis.Redis) -> Iterator[str]:
    port = services.free_port()
    env = {
        **os.environ,
        "PAGEMILL_API_BASE_URL": f"http://127.0.0.1:{port}",
        "PAGEMILL_QUEUE_PREFIX": OPS_QUEUE_PREFIX,
        "PAGEMILL_DATABASE_APPLICATION_NAME": OPS_API_NAME,
    }
    process = services.start_api(env, TMP_ROOT / "ops-api.log", port)
    yield f"http://127.0.0.1:{port}"
    services.stop(process)
    for key in redis_client.scan_iter(f"{OPS_QUEUE_PREFIX}*"):
        redis_client.delete(key)


def steady(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows without the columns that move with the clock between two reads."""
    return [
        {key: value for key, value in row.items() if key not in ("age_seconds", "idle_seconds")}
        for row in rows
    ]


def api_client(base_url: str, key: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=base_url, headers=headers, timeout=60)
