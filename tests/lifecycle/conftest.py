"""Retention, purge, quotas and the result cache against the real services.

Most tests use the session's API and worker. Those that need a worker holding a page
while they act share a private pair (`held_stack`): an API and a worker whose OCR stage
holds pages until released (tests/lifecycle/held_app.py), on their own queues. They
talk to it through `held_api`, which holds everything before the test and after it.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis
from minio import Minio

from tests.conftest import S3_ACCESS_KEY, S3_SECRET_KEY, SAMPLES, TEST_ENV, TMP_ROOT
from tests.support import services

INVOICE = SAMPLES / "invoice-multipage.pdf"
HELD_QUEUE_PREFIX = f"{TEST_ENV['PAGEMILL_QUEUE_PREFIX']}held-"


def sql(query: str, *params: Any) -> list[tuple[Any, ...]]:
    url = TEST_ENV["PAGEMILL_DATABASE_URL"].replace("+psycopg", "")
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(query, params)
        return cursor.fetchall() if cursor.description else []


def stored_keys(job_id: str) -> list[str]:
    """Every object under the job's prefix, listed from the bucket itself."""
    s3 = Minio(TEST_ENV["PAGEMILL_S3_ENDPOINT"], S3_ACCESS_KEY, S3_SECRET_KEY, secure=False)
    objects = s3.list_objects(TEST_ENV["PAGEMILL_S3_BUCKET"], f"jobs/{job_id}/", recursive=True)
    return sorted(item.object_name or "" for item in objects)


def submit(client: httpx.Client, path: Path = INVOICE, **data: str) -> httpx.Response:
    with path.open("rb") as handle:
        return client.post("/v1/jobs", files={"file": (path.name, handle)}, data=data)


@dataclass
class HeldStack:
    url: str
    hold_dir: Path
    worker_log: Path

    def release(self) -> None:
        (self.hold_dir / "release").touch()

    def release_finalize(self) -> None:
        (self.hold_dir / "release-finalize").touch()

    def finalize_held(self) -> bool:
        return (self.hold_dir / "finalize.held").exists()

    def hold(self) -> None:
        for signal in self.hold_dir.iterdir():
            signal.unlink()

    def held_pages(self) -> list[int]:
        return sorted(int(p.name.split("-")[1].split(".")[0]) for p in self.hold_dir.glob("*.held"))

    @contextmanager
    def until_fenced(self, job_id: str, what: str) -> Iterator[None]:
        """Wait, once the block has released held work of a purged job, for the worker to
        find the fence and take back what it wrote; only what it logs from now counts."""
        log_mark = self.worker_log.stat().st_size
        yield
        fenced = f"job {job_id} is being purged".encode()
        services.wait_until(lambda: fenced in self.worker_log.read_bytes()[log_mark:], 60, what)


@pytest.fixture(scope="module")
def held_stack(database_url: str, redis_client: redis.Redis, s3: Any) -> Iterator[HeldStack]:
    hold_dir = Path(tempfile.mkdtemp(prefix="held-", dir=TMP_ROOT))
    port = services.free_port()
    env = {
        **os.environ,
        "PAGEMILL_QUEUE_PREFIX": HELD_QUEUE_PREFIX,
        "PAGEMILL_API_BASE_URL": f"http://127.0.0.1:{port}",
        "PAGEMILL_TEST_HOLD_DIR": str(hold_dir),
    }
    api_log, worker_log = TMP_ROOT / "held-api.log", TMP_ROOT / "held-worker.log"
    processes: list[subprocess.Popen[bytes]] = []
    try:
        processes.append(services.launch_api(env, api_log, port))
        queues = ",".join(f"{HELD_QUEUE_PREFIX}{stage}" for stage in ("prepare", "ocr", "finalize"))
        processes.append(
            services.start_worker(env, worker_log, queues, 1, app="tests.lifecycle.held_app")
        )
        services.wait_for_api(processes[0], api_log, port)
        yield HeldStack(f"http://127.0.0.1:{port}", hold_dir, worker_log)
    finally:
        # Held work must not keep the worker from stopping.
        (hold_dir / "release").touch()
        (hold_dir / "release-finalize").touch()
        for process in processes:
            services.stop(process)
        for key in redis_client.scan_iter(f"{HELD_QUEUE_PREFIX}*"):
            redis_client.delete(key)


@pytest.fixture
def held_api(held_stack: HeldStack, api_key: str) -> Iterator[httpx.Client]:
    """A client of the held stack's API; pages and finalizes are held when it is handed
    over, and again once the test is done, whatever it released."""
    held_stack.hold()
    with httpx.Client(
        base_url=held_stack.url, headers={"Authorization": f"Bearer {api_key}"}, timeout=60
    ) as api:
        yield api
    held_stack.hold()
