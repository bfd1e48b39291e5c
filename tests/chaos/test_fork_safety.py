"""No connection is shared across a fork: a pool child, whether it is the first, a
replacement after a SIGKILL or a replacement after its task quota, holds its own
Postgres, Redis and S3 connections and none of its parent's; fork servers and
their children hold no TCP connection at all."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import redis
from sqlalchemy import text

from pagemill.db.session import session_factory
from pagemill.documents import sandbox
from pagemill.documents.sandbox import Limits, run_sandboxed
from pagemill.settings import get_settings
from pagemill.storage import ObjectStore
from tests.chaos import sockets
from tests.chaos.conftest import Stack, db_rows, wait_for, wait_terminal
from tests.chaos.test_lost_and_killed import (
    assert_one_result_per_page,
    page_states,
    scanned_pdf,
    submit,
)
from tests.support import services

# Rapidocr pages on a busy 2-core host take well over the chaos stacks' 30 s soft
# limit; a killed page is claimed again once its lease runs out.
ROOMY_LIMITS = {
    "PAGEMILL_TASK_TIME_LIMIT_S": "120",
    "PAGEMILL_TASK_CLEANUP_S": "30",
    "PAGEMILL_RENDER_TIMEOUT_S": "100",
    "PAGEMILL_PAGE_LEASE_S": "130",
    "PAGEMILL_BROKER_VISIBILITY_TIMEOUT_S": "200",
}

# Signs in a worker's log that two processes talked over one Postgres connection.
SHARED_CONNECTION_SYMPTOMS = ("prepared statement", "outage, retrying")


def cpu_ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime + stime


def busiest_child(parent: int) -> int:
    """The pool child using the most CPU: the one in the middle of a page."""
    pool = sockets.worker_tree(parent).pool_children
    before = {pid: cpu_ticks(pid) for pid in pool}
    time.sleep(1)
    return max(pool, key=lambda pid: cpu_ticks(pid) - before[pid])


def assert_nothing_shared(stack: Stack, parent: int) -> None:
    shares = sockets.lasting_shares(parent)
    described = {
        inode: (f"port {conn.remote_port}", pids) for inode, (conn, pids) in shares.items()
    }
    assert not shares, f"connections shared by worker {parent} and its children: {described}"
    tree = sockets.worker_tree(parent)
    held = sockets.tcp_by_process(tree.fork_servers + tree.sandboxed)
    assert not any(held.values()), f"fork servers or their children hold TCP connections: {held}"


def assert_one_process_per_backend(pids: list[int]) -> None:
    """pg_stat_activity's view: each backend's client port belongs to one process."""
    ports = [
        row[0] for row in db_rows("SELECT client_port FROM pg_stat_activity WHERE client_port > 0")
    ]
    by_port: dict[int, list[int]] = {}
    for pid, held in sockets.tcp_by_process(pids).items():
        for connection in held.values():
            by_port.setdefault(connection.local_port, []).append(pid)
    shared = {port: by_port[port] for port in ports if len(by_port.get(port, [])) > 1}
    assert not shared, f"Postgres backends serving more than one process: {shared}"


def watch_while_running(stack: Stack, parent: int, job_id: str, timeout_s: float) -> set[int]:
    """Check for shared connections until the job ends; the pool children seen."""
    seen: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        tree = sockets.worker_tree(parent)
        seen.update(tree.pool_children)
        assert_nothing_shared(stack, parent)
        [(status,)] = db_rows("SELECT status::text FROM jobs WHERE id = %s", job_id)
        if status in ("succeeded", "failed"):
            return seen
        time.sleep(0.5)
    raise TimeoutError(f"job {job_id} did not finish within {timeout_s} s")


def assert_no_shared_connection_symptoms(stack: Stack) -> None:
    log = stack.log(f"worker{stack.workers_started}").read_text()
    for symptom in SHARED_CONNECTION_SYMPTOMS:
        assert symptom not in log, f"worker log shows {symptom!r}"


def test_child_replaced_after_sigkill_has_its_own_connections(
    stack_factory: Any, tmp_path: Path, s3: ObjectStore
) -> None:
    stack, _, _ = stack_factory(**ROOMY_LIMITS)
    stack.start_api()
    parent = stack.start_worker(concurrency=2).pid
    first_children = set(sockets.worker_tree(parent).pool_children)
    assert len(first_children) == 2
    with stack.client() as client:
        job_id = submit(client, scanned_pdf(tmp_path, 4), engine="rapidocr")
    wait_for(lambda: any(s[1] == "running" for s in page_states(job_id)), 90, "a running page")
    # The first children were forked before the worker connected anywhere.
    assert_nothing_shared(stack, parent)

    victim = busiest_child(parent)
    running = {number for number, status, *_ in page_states(job_id) if status == "running"}
    os.kill(victim, signal.SIGKILL)
    wait_for(
        lambda: set(sockets.worker_tree(parent).pool_children) - first_children,
        60,
        "a replacement pool child",
    )
    # By now the worker holds its reaper's Postgres connection and the broker's Redis
    # connection: the replacement is forked from a process with live connections.
    seen = watch_while_running(stack, parent, job_id, 600)
    assert seen - first_children, "the killed child was never replaced"
    assert_one_process_per_backend([parent, *sockets.worker_tree(parent).pool_children])

    assert wait_terminal(job_id, 5) == "succeeded"
    assert_one_result_per_page(job_id, 4, s3)
    attempts = {number: attempts for number, _, attempts, _ in page_states(job_id)}
    assert max(attempts[number] for number in running) >= 2, "the kill missed the page"
    assert_no_shared_connection_symptoms(stack)


def test_children_replaced_after_their_task_quota_have_their_own_connections(
    stack_factory: Any, tmp_path: Path, s3: ObjectStore
) -> None:
    stack, _, _ = stack_factory(**ROOMY_LIMITS)
    stack.start_api()
    stack.workers_started += 1
    prefix = stack.env["PAGEMILL_QUEUE_PREFIX"]
    worker = services.start_worker(
        stack.env,
        stack.log(f"worker{stack.workers_started}"),
        ",".join(f"{prefix}{stage}" for stage in ("prepare", "ocr", "finalize")),
        concurrency=2,
        extra_args=["--max-tasks-per-child=1"],
    )
    stack.processes["worker"] = worker
    with stack.client() as client:
        job_id = submit(client, scanned_pdf(tmp_path, 4), engine="rapidocr")
    seen = watch_while_running(stack, worker.pid, job_id, 600)
    # One prepare, four pages and a finalize, one task a child: at least four new children.
    assert len(seen) >= 2 + 4, seen
    assert wait_terminal(job_id, 5) == "succeeded"
    assert_one_result_per_page(job_id, 4, s3)
    assert_no_shared_connection_symptoms(stack)


def test_fork_server_and_its_children_inherit_no_connection(db: str, s3: ObjectStore) -> None:
    # This process holds Postgres, Redis and S3 connections while it starts the server.
    with session_factory()() as session:
        session.execute(text("SELECT 1"))
    redis.Redis.from_url(str(get_settings().broker_url)).ping()
    s3.exists("anything")
    assert sockets.tcp_by_process([os.getpid()])[os.getpid()], "the test holds no connection"

    limits = Limits(memory_bytes=1 << 30, cpu_s=30, wall_s=60)
    held = list(run_sandboxed("tests.chaos.sandboxed_descriptors", [], limits))
    assert held and held[0]["descriptors"] >= 3, "the child did not report"
    network = [line for line in held if line["family"] in ("AF_INET", "AF_INET6")]
    assert network == [], f"a sandboxed child holds network sockets: {network}"
    server = sandbox._FORK_SERVER._process
    assert server is not None and server.poll() is None
    assert sockets.tcp_by_process([server.pid]) == {server.pid: {}}
