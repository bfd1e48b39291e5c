"""Real Postgres, Redis and S3 for every test that touches them.

Postgres and Redis are the machine's own (127.0.0.1:5432 and :6379); each test
session gets its own database and Redis database number. SeaweedFS is started
here when nothing serves S3 on :8333.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis

from tests.support import services

RUN_ID = secrets.token_hex(4)
PG_ADMIN_URL = os.environ.get(
    "PAGEMILL_TEST_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres"
)
DB_NAME = f"pagemill_test_{RUN_ID}"
REDIS_DB = int(os.environ.get("PAGEMILL_TEST_REDIS_DB", "9"))
S3_ACCESS_KEY = "pagemill-test"
S3_SECRET_KEY = "pagemill-test-secret"
TMP_ROOT = Path(tempfile.mkdtemp(prefix=f"pagemill-test-{RUN_ID}-"))

TEST_ENV = {
    "PAGEMILL_ENVIRONMENT": "test",
    "PAGEMILL_DATABASE_URL": f"postgresql+psycopg://postgres@127.0.0.1:5432/{DB_NAME}",
    "PAGEMILL_BROKER_URL": f"redis://127.0.0.1:6379/{REDIS_DB}",
    "PAGEMILL_QUEUE_PREFIX": f"t{RUN_ID}-",
    "PAGEMILL_S3_ENDPOINT": "127.0.0.1:8333",
    "PAGEMILL_S3_ACCESS_KEY": S3_ACCESS_KEY,
    "PAGEMILL_S3_SECRET_KEY": S3_SECRET_KEY,
    "PAGEMILL_S3_BUCKET": f"pagemill-test-{RUN_ID}",
    "PAGEMILL_TASK_TIME_LIMIT_S": "300",
    # 3.60 USD a device-hour: a page's cost in USD is its device seconds / 1000.
    "PAGEMILL_DEVICE_PRICE_USD_PER_HOUR": "3.6",
    "PAGEMILL_HEARTBEAT_INTERVAL_S": "1",
    "PAGEMILL_RENDER_TIMEOUT_S": "240",
    "PAGEMILL_BROKER_VISIBILITY_TIMEOUT_S": "900",
    # Webhooks: a compressed retry schedule (5 attempts in a few seconds), and the
    # tests' receivers listen on 127.0.0.1, which must be allowlisted explicitly.
    "PAGEMILL_WEBHOOK_RETRY_SCHEDULE_S": "0.5,1,1,1",
    "PAGEMILL_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
    "PAGEMILL_WEBHOOK_TIMEOUT_S": "5",
    "PAGEMILL_WEBHOOK_ATTEMPT_DEADLINE_S": "10",
    "PAGEMILL_WEBHOOK_ATTEMPT_LEASE_S": "30",
    # Documents by URL: the tests' HTTPS servers listen on 127.0.0.1 with a certificate
    # made for the test (tests/support/https_sources.py writes it where this points).
    "PAGEMILL_SOURCE_FETCH_ALLOWED_HOSTS": "127.0.0.1",
    "PAGEMILL_SOURCE_FETCH_CA_BUNDLE": str(TMP_ROOT / "source-ca.pem"),
    "PAGEMILL_SOURCE_FETCH_TIMEOUT_S": "3",
    "PAGEMILL_SOURCE_READABLE_BUCKETS": f"pagemill-test-sources-{RUN_ID}",
    # Each test empties the database and writes the history its quotes read: a cost model
    # the API kept from an earlier test would price its pages (tests/accounting sets one).
    "PAGEMILL_QUOTE_MODEL_TTL_S": "0",
}
# Set before anything reads settings, so in-process code and child processes agree.
os.environ.update(TEST_ENV)

FIXTURES = Path(__file__).parent / "fixtures"
SAMPLES = services.ROOT / "samples"


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{DB_NAME}"')
    from alembic import command
    from alembic.config import Config

    config = Config(str(services.ROOT / "alembic.ini"))
    config.set_main_option("sqlalchemy.url", TEST_ENV["PAGEMILL_DATABASE_URL"])
    config.attributes["configure_logger"] = False
    command.upgrade(config, "head")
    yield TEST_ENV["PAGEMILL_DATABASE_URL"]
    from pagemill.db.session import get_engine

    get_engine().dispose()
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')


@pytest.fixture()
def db(database_url: str) -> Iterator[str]:
    """A clean database for this test; afterwards, a check that every job the test
    ended has no page left queued or running (pagemill.jobs.repository.complete_job)."""
    url = database_url.replace("+psycopg", "")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE clients, jobs, pages, workers RESTART IDENTITY CASCADE")
    yield database_url
    with psycopg.connect(url, autocommit=True) as conn:
        unfinished = conn.execute(UNFINISHED_PAGES_OF_ENDED_JOBS).fetchall()
    assert not unfinished, f"ended jobs with unfinished pages (job, status, pages): {unfinished}"


UNFINISHED_PAGES_OF_ENDED_JOBS = """
    SELECT jobs.id::text, jobs.status::text, count(*) FROM jobs JOIN pages ON pages.job_id = jobs.id
    WHERE jobs.status IN ('succeeded', 'failed', 'cancelled')
      AND pages.status IN ('queued', 'running')
    GROUP BY jobs.id, jobs.status
"""


@pytest.fixture(scope="session")
def redis_client() -> Iterator[redis.Redis]:
    # Not flushed: other test sessions may share this database; the queue prefix
    # keeps each session's messages apart.
    client = redis.Redis.from_url(TEST_ENV["PAGEMILL_BROKER_URL"])
    yield client
    for key in client.scan_iter(f"{TEST_ENV['PAGEMILL_QUEUE_PREFIX']}*"):
        client.delete(key)


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, the controller starts the one S3 server every test process
    shares (when none runs yet), so two processes never race to start it on :8333 and
    none stops it while another still writes."""
    if _is_xdist_controller(config) and not services.s3_ready(S3_ACCESS_KEY, S3_SECRET_KEY):
        data_dir = TMP_ROOT / "seaweedfs"
        data_dir.mkdir()
        config.stash[_SHARED_S3] = services.start_seaweedfs(data_dir, S3_ACCESS_KEY, S3_SECRET_KEY)


def pytest_unconfigure(config: pytest.Config) -> None:
    process = config.stash.get(_SHARED_S3, None)
    if process is not None:
        services.stop(process)


# Folders whose tests run for minutes (worker stacks waiting out leases, a browser,
# network namespaces, the benchmark's smoke run). Run first, so that when the test
# processes share the work (pytest-xdist, one file at a time), no long file is left to
# run alone at the end.
LONG_RUNNING_FIRST = ("chaos", "multihost", "bench", "console", "batches", "lifecycle")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        parts = item.path.relative_to(Path(__file__).parent).parts
        folder = parts[0] if len(parts) > 1 else ""
        return LONG_RUNNING_FIRST.index(folder) if folder in LONG_RUNNING_FIRST else 99

    items.sort(key=rank)  # stable: the order within a folder stays as collected


def _is_xdist_controller(config: pytest.Config) -> bool:
    numprocesses = config.getoption("numprocesses", default=None)
    return bool(numprocesses) and not hasattr(config, "workerinput")


_SHARED_S3 = pytest.StashKey[subprocess.Popen[bytes]]()


@pytest.fixture(scope="session")
def s3() -> Iterator[Any]:
    process = None
    if not services.s3_ready(S3_ACCESS_KEY, S3_SECRET_KEY):
        data_dir = TMP_ROOT / "seaweedfs"
        data_dir.mkdir()
        process = services.start_seaweedfs(data_dir, S3_ACCESS_KEY, S3_SECRET_KEY)
    from pagemill.storage import get_object_store

    store = get_object_store()
    store.ensure_bucket()
    yield store
    if process is not None:
        services.stop(process)


@pytest.fixture(scope="session")
def worker_process(
    database_url: str, redis_client: redis.Redis, s3: Any
) -> Iterator[subprocess.Popen[bytes]]:
    prefix = TEST_ENV["PAGEMILL_QUEUE_PREFIX"]
    queues = ",".join(f"{prefix}{stage}" for stage in ("prepare", "ocr", "finalize", "webhooks"))
    process = services.start_worker(dict(os.environ), TMP_ROOT / "worker.log", queues)
    yield process
    services.stop(process)


# The session API's name in pg_stat_activity, to tell its sessions from a worker's
# (whose reaper reads the same tables) in tests that watch for a request's lock wait.
API_APPLICATION_NAME = "pagemill-test-api"


@pytest.fixture(scope="session")
def api_url(database_url: str, redis_client: redis.Redis, s3: Any) -> Iterator[str]:
    port = services.free_port()
    env = {
        **os.environ,
        "PAGEMILL_API_BASE_URL": f"http://127.0.0.1:{port}",
        "PAGEMILL_DATABASE_APPLICATION_NAME": API_APPLICATION_NAME,
    }
    process = services.start_api(env, TMP_ROOT / "api.log", port)
    yield f"http://127.0.0.1:{port}"
    services.stop(process)


def make_client_key(name: str | None = None, admin: bool = False) -> str:
    from pagemill.clients.repository import create_client
    from pagemill.db.session import session_scope

    with session_scope() as session:
        _, key = create_client(session, name or f"client-{uuid.uuid4().hex[:8]}", is_admin=admin)
    return key


@pytest.fixture()
def api_key(db: str) -> str:
    return make_client_key()


@pytest.fixture()
def api(api_url: str, api_key: str) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=api_url, headers={"Authorization": f"Bearer {api_key}"}, timeout=60
    ) as client:
        yield client


def wait_for_job(client: httpx.Client, job_id: str, timeout_s: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return job
        time.sleep(0.3)
    raise TimeoutError(f"job {job_id} still {job['status']} after {timeout_s} s")
