"""Faults that meet finalize: an S3 outage while it assembles the result, the copies
of its message the reaper publishes meanwhile, its worker killed mid-start, and the
pool child running it killed alone (the OOM killer).

The pages are read by a worker that does not consume the finalize queue, so the job
waits, every page ended, for a finalize that runs only once the fault is in place.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from tests.chaos import sockets
from tests.chaos.conftest import Stack, db_rows, wait_for, wait_terminal
from tests.chaos.test_lost_and_killed import page_states, submit
from tests.chaos.test_slow_finalize import JOB_BOUND_S, marked_pdf, start_stalling_stack
from tests.conftest import SAMPLES
from tests.support import services
from tests.support.stalling_app import FINALIZE_STALLS_IN_PYTHON
from worker.tasks import LOST_FINALIZE_MESSAGE

# Shorter than the outage retries (2 + 4 + 8 + 16 s before the fifth try), several
# stale periods of the reaper (3 s) long.
S3_OUTAGE_S = 20


def start_pages_worker(stack: Stack) -> None:
    """A worker for prepare and ocr only: the job's finalize waits in its queue."""
    prefix = stack.env["PAGEMILL_QUEUE_PREFIX"]
    stack.processes["pages-worker"] = services.start_worker(
        stack.env, stack.log("pages-worker"), f"{prefix}prepare,{prefix}ocr"
    )


def finalize_starts(job_id: str) -> int:
    [(starts,)] = db_rows("SELECT finalize_attempts FROM jobs WHERE id = %s", job_id)
    return int(starts)


def every_page_succeeded(job_id: str, pages: int) -> bool:
    states = page_states(job_id)
    return len(states) == pages and all(state[1] == "succeeded" for state in states)


def test_an_s3_outage_during_finalize_is_ridden_out(stack_factory: Any) -> None:
    stack, _, s3_proxy = stack_factory(s3_proxy=True)
    stack.start_api()
    start_pages_worker(stack)
    with stack.client() as client:
        job_id = submit(client, SAMPLES / "invoice-multipage.pdf")
    wait_for(lambda: every_page_succeeded(job_id, 3), 90, "every page read")
    # Long enough for the reaper to publish the waiting finalize again, several times.
    time.sleep(8)
    s3_proxy.cut()
    stack.start_worker()
    wait_for(lambda: finalize_starts(job_id) > 0, 60, "finalize to start")
    time.sleep(S3_OUTAGE_S)
    s3_proxy.restore()
    status = wait_terminal(job_id, 120)
    [(code, message, attempts)] = db_rows(
        "SELECT error_code, error_message, finalize_attempts FROM jobs WHERE id = %s", job_id
    )
    assert status == "succeeded", (code, message, attempts)
    # One start rode the outage out; the copies of its message waiting in the queue,
    # and any the reaper published meanwhile, counted none.
    assert attempts == 1, attempts
    assert "outage, retrying" in stack.log_text(f"worker{stack.workers_started}")


# A lease just over the task time limit, so a start lost with its worker is taken over
# within seconds.
SHORT_LEASE = {
    "PAGEMILL_TASK_TIME_LIMIT_S": "12",
    "PAGEMILL_TASK_CLEANUP_S": "5",
    "PAGEMILL_RENDER_TIMEOUT_S": "10",
    "PAGEMILL_PAGE_LEASE_S": "15",
}


def test_a_finalize_lost_with_its_worker_is_started_again_when_its_lease_ends(
    stack_factory: Any,
) -> None:
    stack, _, s3_proxy = stack_factory(s3_proxy=True, **SHORT_LEASE)
    stack.start_api()
    start_pages_worker(stack)
    with stack.client() as client:
        job_id = submit(client, SAMPLES / "invoice-multipage.pdf")
    wait_for(lambda: every_page_succeeded(job_id, 3), 90, "every page read")
    s3_proxy.cut()
    stack.start_worker()
    wait_for(lambda: finalize_starts(job_id) > 0, 60, "finalize to start")
    # Its outage retry, waiting in the dead worker, is not redelivered before the
    # broker's visibility timeout (90 s): only the reaper can start finalize again.
    stack.kill_worker(signal.SIGKILL)
    s3_proxy.restore()
    stack.start_worker()
    assert wait_terminal(job_id, 60) == "succeeded"
    [(attempts,)] = db_rows("SELECT finalize_attempts FROM jobs WHERE id = %s", job_id)
    assert attempts == 2


def test_a_finalize_whose_process_died_starts_again_before_its_lease_ends(
    stack_factory: Any, tmp_path: Path
) -> None:
    # A lease far longer than the test may take: only letting go of it lets the message,
    # requeued when its process died, start finalize again.
    stack, worker = start_stalling_stack(
        stack_factory,
        PAGEMILL_PAGE_LEASE_S="1200",
        PAGEMILL_BROKER_VISIBILITY_TIMEOUT_S="1260",
    )
    with stack.client() as client:
        job_id = submit(client, marked_pdf(tmp_path / "stalls.pdf", text=FINALIZE_STALLS_IN_PYTHON))
    wait_for(lambda: finalize_starts(job_id) == 1, 90, "finalize to start")
    [child] = sockets.worker_tree(worker.pid).pool_children  # concurrency 1: the one stalling
    killed_at = time.monotonic()
    os.kill(child, signal.SIGKILL)

    # The second start stalls too, until the soft time limit stops it: the cap of two
    # starts ends the job, long before the first start's lease would have run out.
    assert wait_terminal(job_id, JOB_BOUND_S) == "failed"
    assert time.monotonic() - killed_at < 300
    [(attempts, message)] = db_rows(
        "SELECT finalize_attempts, error_message FROM jobs WHERE id = %s", job_id
    )
    assert attempts == 2, message
    assert "exceeded the 12 s time limit (2 attempts)" in message
    worker_log = stack.log("worker1").read_text()
    assert f"job {job_id} finalize attempt 1: {LOST_FINALIZE_MESSAGE}" in worker_log
