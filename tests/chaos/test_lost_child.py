"""A pool child killed mid-page (the OOM killer, a crash in native code) gives its page
back at once: the page is read again long before its lease would have run out."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from pagemill.storage import ObjectStore
from tests.chaos import sockets
from tests.chaos.conftest import db_rows, wait_for, wait_terminal
from tests.chaos.test_fork_safety import ROOMY_LIMITS, busiest_child
from tests.chaos.test_lost_and_killed import assert_one_result_per_page, page_states, submit
from tests.chaos.test_lost_and_killed import scanned_pdf as scanned

# A lease far longer than the test may take: only letting go of the claim finishes it.
LONG_LEASE_S = 1200
WITHIN_S = 300


def test_a_page_whose_process_died_is_read_again_before_its_lease_ends(
    stack_factory: Any, tmp_path: Path, s3: ObjectStore
) -> None:
    stack, _, _ = stack_factory(
        **{
            **ROOMY_LIMITS,
            "PAGEMILL_PAGE_LEASE_S": str(LONG_LEASE_S),
            "PAGEMILL_BROKER_VISIBILITY_TIMEOUT_S": str(LONG_LEASE_S + 60),
        }
    )
    stack.start_api()
    parent = stack.start_worker(concurrency=2).pid
    with stack.client() as client:
        job_id = submit(client, scanned(tmp_path, 2), engine="rapidocr")
    wait_for(lambda: any(s[1] == "running" for s in page_states(job_id)), 90, "a running page")
    victim = busiest_child(parent)
    running = {number for number, status, *_ in page_states(job_id) if status == "running"}
    killed_at = time.monotonic()
    os.kill(victim, signal.SIGKILL)

    assert wait_terminal(job_id, WITHIN_S) == "succeeded"
    assert time.monotonic() - killed_at < LONG_LEASE_S / 2
    assert victim not in sockets.worker_tree(parent).pool_children
    assert_one_result_per_page(job_id, 2, s3)
    attempts = {number: attempts for number, _, attempts, _ in page_states(job_id)}
    assert max(attempts[number] for number in running) >= 2, "the kill missed the page"
    # Each attempt is counted: the lost one among the page's claims, none charged twice.
    [(charged_pages,)] = db_rows(
        "SELECT count(*) FROM pages WHERE job_id = %s AND cost_usd > 0", job_id
    )
    assert charged_pages == 2
    assert (
        "the worker process reading the page died"
        in stack.log(f"worker{stack.workers_started}").read_text()
    )
