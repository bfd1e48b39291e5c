"""The real services for the benchmarks: a database of their own (created,
migrated and dropped here, as tests/conftest.py does), Redis database 12 under a
queue prefix of their own, a bucket of their own on SeaweedFS (started when
nothing serves S3 on :8333), the API and Celery workers as real processes.

`configure_env()` must run before anything imports pagemill's settings.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import ROOT

RUN_ID = secrets.token_hex(4)
PG_ADMIN_URL = os.environ.get(
    "PAGEMILL_TEST_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres"
)
REDIS_DB = int(os.environ.get("PAGEMILL_BENCH_REDIS_DB", "12"))
S3_ACCESS_KEY = "pagemill-test"
S3_SECRET_KEY = "pagemill-test-secret"  # noqa: S105 (the local test S3 server's)
DB_NAME = f"pagemill_bench_{RUN_ID}"

BENCH_ENV = {
    "PAGEMILL_ENVIRONMENT": "test",
    "PAGEMILL_DATABASE_URL": f"postgresql+psycopg://postgres@127.0.0.1:5432/{DB_NAME}",
    "PAGEMILL_BROKER_URL": f"redis://127.0.0.1:6379/{REDIS_DB}",
    "PAGEMILL_QUEUE_PREFIX": f"b{RUN_ID}-",
    "PAGEMILL_S3_ENDPOINT": "127.0.0.1:8333",
    "PAGEMILL_S3_ACCESS_KEY": S3_ACCESS_KEY,
    "PAGEMILL_S3_SECRET_KEY": S3_SECRET_KEY,
    "PAGEMILL_S3_BUCKET": f"pagemill-bench-{RUN_ID}",
    "PAGEMILL_TASK_TIME_LIMIT_S": "300",
    "PAGEMILL_BROKER_VISIBILITY_TIMEOUT_S": "900",
    "PAGEMILL_RENDER_TIMEOUT_S": "240",
    "PAGEMILL_HEARTBEAT_INTERVAL_S": "5",
    # The benchmark is one client sending many jobs and polling them.
    "PAGEMILL_RATE_LIMIT": "1000000/minute",
    "PAGEMILL_MAX_PAGES": "2000",
}


def configure_env() -> dict[str, str]:
    os.environ.update(BENCH_ENV)
    return dict(BENCH_ENV)


@dataclass
class Stack:
    workdir: Path
    api_url: str = ""
    api_key: str = ""
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def queues(self, *stages: str) -> str:
        prefix = BENCH_ENV["PAGEMILL_QUEUE_PREFIX"]
        return ",".join(f"{prefix}{stage}" for stage in stages)

    def start_api(self) -> None:
        from tests.support import services

        port = services.free_port()
        self.api_url = f"http://127.0.0.1:{port}"
        env = {**os.environ, "PAGEMILL_API_BASE_URL": self.api_url}
        self.processes["api"] = services.start_api(env, self.workdir / "api.log", port)

    def start_worker(
        self, name: str, app: str, queues: str, concurrency: int, pool: str = "prefork"
    ) -> subprocess.Popen[bytes]:
        from tests.support import services

        process = services.start_worker(
            dict(os.environ),
            self.workdir / f"{name}.log",
            queues,
            concurrency=concurrency,
            pool=pool,
            app=app,
        )
        self.processes[name] = process
        return process

    def stop(self, name: str) -> None:
        from tests.support import services

        process = self.processes.pop(name, None)
        if process is not None:
            services.stop(process, timeout_s=30)

    def stop_all(self) -> None:
        for name in list(self.processes):
            self.stop(name)


@contextmanager
def services_up(workdir: Path) -> Iterator[Stack]:
    """Database, Redis prefix and bucket for one benchmark run; removed afterwards."""
    import psycopg
    import redis

    from tests.support import services

    configure_env()
    weed: subprocess.Popen[bytes] | None = None
    if not services.s3_ready(S3_ACCESS_KEY, S3_SECRET_KEY):
        data_dir = workdir / "seaweedfs"
        data_dir.mkdir(parents=True, exist_ok=True)
        weed = services.start_seaweedfs(data_dir, S3_ACCESS_KEY, S3_SECRET_KEY)
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{DB_NAME}"')
    stack = Stack(workdir)
    try:
        _migrate()
        from pagemill.storage import get_object_store

        get_object_store().ensure_bucket()
        stack.api_key = _client_key()
        yield stack
    finally:
        stack.stop_all()
        from pagemill.db.session import get_engine

        get_engine().dispose()
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
        client = redis.Redis.from_url(BENCH_ENV["PAGEMILL_BROKER_URL"])
        # Queues, counters and kombu's bindings (`_kombu.binding.<queue>`) of this run.
        for pattern in (f"*{BENCH_ENV['PAGEMILL_QUEUE_PREFIX']}*", f"*pagemill-bench-{RUN_ID}*"):
            for key in client.scan_iter(pattern):
                client.delete(key)
        _drop_bucket()
        if weed is not None:
            services.stop(weed)


def _migrate() -> None:
    from alembic import command
    from alembic.config import Config

    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("sqlalchemy.url", BENCH_ENV["PAGEMILL_DATABASE_URL"])
    config.attributes["configure_logger"] = False
    command.upgrade(config, "head")


def _client_key() -> str:
    from pagemill.clients.repository import create_client
    from pagemill.db.session import session_scope

    with session_scope() as session:
        _, key = create_client(session, f"bench-{RUN_ID}")
    return key


def _drop_bucket() -> None:
    from minio import Minio
    from minio.deleteobjects import DeleteObject

    client = Minio("127.0.0.1:8333", S3_ACCESS_KEY, S3_SECRET_KEY, secure=False)
    bucket = BENCH_ENV["PAGEMILL_S3_BUCKET"]
    try:
        if not client.bucket_exists(bucket):
            return
        names = (DeleteObject(o.object_name) for o in client.list_objects(bucket, recursive=True))
        for error in client.remove_objects(bucket, names):
            print(f"could not delete {error}", file=sys.stderr)
        client.remove_bucket(bucket)
    except Exception as error:
        print(f"bucket {bucket} left behind: {error}", file=sys.stderr)


def process_tree(root: subprocess.Popen[bytes]) -> list[Any]:
    import psutil

    parent = psutil.Process(root.pid)
    return [parent, *parent.children(recursive=True)]


def cpu_seconds_by_role(processes: dict[str, subprocess.Popen[bytes]]) -> dict[str, float]:
    """CPU seconds of each named process tree, split into the root process, its other
    descendants (Celery pool children) and the sandbox's fork servers, whose reaped
    children (the inspect and render children) count with them."""
    import psutil

    totals: dict[str, float] = {}
    for name, root in processes.items():
        for proc in process_tree(root):
            try:
                times = proc.cpu_times()
                command = " ".join(proc.cmdline())
            except psutil.NoSuchProcess:
                continue
            if proc.pid == root.pid:
                role = name
            elif "pagemill.documents.zygote" in command or is_sandbox_child(proc):
                role = f"{name} sandbox children"
            else:
                role = f"{name} pool children"
            used = times.user + times.system + times.children_user + times.children_system
            totals[role] = totals.get(role, 0.0) + used
    return totals


def cpu_seconds(processes: list[subprocess.Popen[bytes]]) -> float:
    """User plus system CPU of each process, its live descendants and the
    descendants it has already waited for (the render children of prepare)."""
    import psutil

    total = 0.0
    for root in processes:
        for proc in process_tree(root):
            try:
                times = proc.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system + times.children_user + times.children_system
    return total


def is_sandbox_child(proc: Any) -> bool:
    """A child forked by the sandbox's fork server (one per document, short-lived)."""
    parent = proc.parent()
    return parent is not None and "pagemill.documents.zygote" in " ".join(parent.cmdline())


def rss_bytes(root: subprocess.Popen[bytes], *, exclude_transient: bool = True) -> int:
    """Resident memory of a worker: its parent and pool children (render children,
    which live for one prepare, are left out when asked)."""
    import psutil

    total = 0
    for proc in process_tree(root):
        try:
            if exclude_transient and is_sandbox_child(proc):
                continue
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total
