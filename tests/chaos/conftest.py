"""A private stack per fault test: its own Redis server, API and worker processes,
with the database and S3 optionally behind cuttable proxies. Timings are short so
recovery shows within seconds: the reaper runs every second, queued work is
stale after 3 s, a page lease lasts 70 s.

Fault tests that need nothing but the default timings share one stack instead
(`shared_stack`), handed on from one such test to the next while they run in a
row; see SharedStacks for when it is closed."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis

from tests.conftest import TEST_ENV, TMP_ROOT, make_client_key
from tests.support import services
from tests.support.proxy import TcpProxy

FAST_RECOVERY = {
    "PAGEMILL_REAPER_INTERVAL_S": "1",
    "PAGEMILL_STALE_AFTER_S": "3",
    # A page takes 2-4 s alone, but far longer on a loaded 2-core machine.
    "PAGEMILL_TASK_TIME_LIMIT_S": "60",
    "PAGEMILL_RENDER_TIMEOUT_S": "45",
    "PAGEMILL_PAGE_LEASE_S": "70",
    "PAGEMILL_BROKER_VISIBILITY_TIMEOUT_S": "90",
    "PAGEMILL_WEBHOOK_MAX_COUNTDOWN_S": "10",
}


class RedisServer:
    def __init__(self) -> None:
        self.port = services.free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        services.wait_until(lambda: services.port_open("127.0.0.1", self.port), 10, "redis")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class Stack:
    env: dict[str, str]
    name: str
    redis_server: RedisServer
    api_key: str = ""
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    workers_started: int = 0
    api_port: int = 0
    api_answering: bool = False
    log_marks: dict[str, int] = field(default_factory=dict)

    def start_api(self) -> None:
        """Starts the API without waiting for it: a test starts its worker next, and
        the two start-ups (several seconds of imports each) overlap. The first use of
        `api_url` or `client()` waits until the API answers."""
        self.api_port = services.free_port()
        env = {**self.env, "PAGEMILL_API_BASE_URL": f"http://127.0.0.1:{self.api_port}"}
        self.processes["api"] = services.launch_api(env, self.log("api"), self.api_port)
        self.api_answering = False

    @property
    def api_url(self) -> str:
        if not self.api_answering:
            services.wait_for_api(self.processes["api"], self.log("api"), self.api_port)
            self.api_answering = True
        return f"http://127.0.0.1:{self.api_port}"

    def start_worker(
        self, concurrency: int = 2, app: str = "worker.celery_app"
    ) -> subprocess.Popen[bytes]:
        self.workers_started += 1
        prefix = self.env["PAGEMILL_QUEUE_PREFIX"]
        queues = ",".join(f"{prefix}{stage}" for stage in ("prepare", "ocr", "finalize"))
        process = services.start_worker(
            self.env, self.log(f"worker{self.workers_started}"), queues, concurrency, app=app
        )
        self.processes["worker"] = process
        return process

    def kill_worker(self, sig: signal.Signals = signal.SIGKILL) -> None:
        process = self.processes["worker"]
        if sig is signal.SIGKILL:
            os.killpg(process.pid, sig)  # the whole worker, pool children included
        else:
            process.send_signal(sig)  # as a supervisor does: to the main process only

    def log(self, name: str) -> Path:
        return TMP_ROOT / f"{self.name}-{name}.log"

    def mark_logs(self) -> None:
        """From now on `log_text` reads only what the stack's processes write next."""
        self.log_marks = {
            path.name: path.stat().st_size for path in TMP_ROOT.glob(f"{self.name}-*.log")
        }

    def log_text(self, name: str) -> str:
        """What a process of the stack logged since `mark_logs` (all of it if never marked)."""
        path = self.log(name)
        return path.read_bytes()[self.log_marks.get(path.name, 0) :].decode()

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.api_url, headers={"Authorization": f"Bearer {self.api_key}"}, timeout=60
        )

    def close(self) -> None:
        for process in self.processes.values():
            with_group_kill(process)
        self.redis_server.stop()


def with_group_kill(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


def make_stack(
    name: str,
    db_proxy: TcpProxy | None = None,
    s3_proxy: TcpProxy | None = None,
    extra: dict[str, str] | None = None,
) -> Stack:
    server = RedisServer()
    env = {
        **os.environ,
        **FAST_RECOVERY,
        "PAGEMILL_BROKER_URL": server.url,
        "PAGEMILL_QUEUE_PREFIX": f"chaos-{uuid.uuid4().hex[:6]}-",
        **(extra or {}),
    }
    if db_proxy is not None:
        env["PAGEMILL_DATABASE_URL"] = TEST_ENV["PAGEMILL_DATABASE_URL"].replace(
            "127.0.0.1:5432", db_proxy.address
        )
    if s3_proxy is not None:
        env["PAGEMILL_S3_ENDPOINT"] = s3_proxy.address
    return Stack(env=env, name=name, redis_server=server)


@pytest.fixture()
def stack_factory(db: str, s3: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    stacks: list[Stack] = []
    proxies: list[TcpProxy] = []

    def factory(
        db_proxy: bool = False, s3_proxy: bool = False, **extra: str
    ) -> tuple[Stack, TcpProxy | None, TcpProxy | None]:
        db_p = TcpProxy("127.0.0.1", 5432) if db_proxy else None
        s3_p = TcpProxy("127.0.0.1", 8333) if s3_proxy else None
        proxies.extend(p for p in (db_p, s3_p) if p is not None)
        stack = make_stack(request.node.name, db_p, s3_p, extra)
        stack.api_key = make_client_key()
        stacks.append(stack)
        return stack, db_p, s3_p

    yield factory
    for stack in stacks:
        stack.close()
    for proxy in proxies:
        proxy.close()


SharedStack = tuple[Stack, TcpProxy, TcpProxy]


class SharedStacks:
    """One default stack (API, a worker of concurrency 2, the database and S3 behind
    proxies) handed from one `shared_stack` test to the next, which saves each of
    them starting and stopping three processes.

    It must not outlive that run of tests: its worker reaps the one test database
    every second, and would publish other tests' queued or stale work to its own
    queues and run it. So it is closed as soon as a test that does not share it
    starts (`_close_shared_stack_for_others`), at the end of tests/chaos, and after
    a test that failed or left it broken."""

    def __init__(self) -> None:
        self.parked: SharedStack | None = None
        self.made = 0

    def take(self) -> SharedStack:
        if self.parked is not None:
            found, self.parked = self.parked, None
            return found
        self.made += 1
        db_proxy, s3_proxy = TcpProxy("127.0.0.1", 5432), TcpProxy("127.0.0.1", 8333)
        stack = make_stack(f"shared-stack-{self.made}", db_proxy, s3_proxy)
        stack.start_api()
        stack.start_worker()
        return stack, db_proxy, s3_proxy

    def park(self, found: SharedStack, healthy: bool) -> None:
        """Kept for the next test if it is as a test found it: proxies open, Redis,
        the API and a worker running."""
        stack, db_proxy, s3_proxy = found
        db_proxy.restore()
        s3_proxy.restore()
        if healthy and not stack.redis_server.running:
            stack.redis_server.start()
        worker = stack.processes.get("worker")
        if healthy and worker is not None and worker.poll() is None:
            healthy = stack.processes["api"].poll() is None
        else:
            healthy = False
        if healthy:
            self.parked = found
        else:
            close_shared(found)

    def close(self) -> None:
        if self.parked is not None:
            close_shared(self.parked)
            self.parked = None


def close_shared(found: SharedStack) -> None:
    stack, db_proxy, s3_proxy = found
    stack.close()
    db_proxy.close()
    s3_proxy.close()


@pytest.fixture(scope="package")
def shared_stacks() -> Iterator[SharedStacks]:
    stacks = SharedStacks()
    yield stacks
    stacks.close()


@pytest.fixture(autouse=True)
def _close_shared_stack_for_others(
    request: pytest.FixtureRequest, shared_stacks: SharedStacks
) -> None:
    if "shared_stack" not in request.fixturenames:
        shared_stacks.close()


@pytest.fixture()
def shared_stack(
    db: str, s3: Any, shared_stacks: SharedStacks, request: pytest.FixtureRequest
) -> Iterator[SharedStack]:
    """A default stack, API and worker running, with the database and S3 behind
    proxies; the test's own client key; `log_text` reads only what this test's
    work logged. A test may cut a proxy, restart Redis or replace the worker: the
    proxies are restored and Redis restarted afterwards."""
    found = shared_stacks.take()
    stack = found[0]
    stack.api_key = make_client_key()
    stack.mark_logs()
    failures = request.session.testsfailed
    yield found
    shared_stacks.park(found, healthy=request.session.testsfailed == failures)


def db_rows(sql: str, *params: Any) -> list[tuple[Any, ...]]:
    url = TEST_ENV["PAGEMILL_DATABASE_URL"].replace("+psycopg", "")
    with psycopg.connect(url) as conn:
        return conn.execute(sql, params).fetchall()  # type: ignore[arg-type]


def wait_for(check: Any, timeout_s: float, what: str) -> None:
    services.wait_until(check, timeout_s, what)


def wait_terminal(job_id: str, timeout_s: float = 240) -> str:
    """Poll the database, not the API: the API may be behind a cut proxy."""
    deadline = time.monotonic() + timeout_s
    status = "?"
    while time.monotonic() < deadline:
        [(status,)] = db_rows("SELECT status::text FROM jobs WHERE id = %s", job_id)
        if status in ("succeeded", "failed", "cancelled"):
            return str(status)
        time.sleep(0.5)
    raise TimeoutError(f"job {job_id} still {status} after {timeout_s} s")


def redis_keys(stack: Stack) -> list[bytes]:
    return list(redis.Redis.from_url(stack.redis_server.url).keys("*"))
