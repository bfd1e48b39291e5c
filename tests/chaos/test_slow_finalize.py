"""A finalize that outlives the task time limit: each start is counted, the stop
counts as a failure with its reason, the job fails after PAGEMILL_FINALIZE_MAX_ATTEMPTS
starts with its pages' cost kept and its failure event recorded, and the worker is
free for the next job.

The worker is the production one with finalize's assembly stalling on a marked
document (tests.support.stalling_app): stuck as in a C call, where only the hard
limit's kill ends it, or in Python, where the soft limit stops it. The limits are
short: a 12 s hard limit, the soft limit 5 s before it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pymupdf
import pytest

from tests.chaos.conftest import db_rows, wait_terminal
from tests.chaos.test_lost_and_killed import submit
from tests.conftest import SAMPLES
from tests.support.stalling_app import FINALIZE_STALLS_IN_C, FINALIZE_STALLS_IN_PYTHON

STALL_LIMITS = {
    "PAGEMILL_TASK_TIME_LIMIT_S": "12",
    "PAGEMILL_TASK_CLEANUP_S": "5",
    "PAGEMILL_RENDER_TIMEOUT_S": "10",
    "PAGEMILL_FINALIZE_MAX_ATTEMPTS": "2",
}
# Generous on a shared 2-core machine: a page, then two finalize starts of 12 s at most.
JOB_BOUND_S = 120


def marked_pdf(path: Path, text: str = "", title: str = "") -> Path:
    """One born-digital page carrying `text` as a line, and `title` as its title."""
    document = pymupdf.open()
    page = document.new_page(width=595, height=842)
    page.insert_text((72, 72), "A page whose document is marked for a stalling stage.")
    if text:
        page.insert_text((72, 100), text)
    if title:
        document.set_metadata({"title": title})
    document.save(path)
    return path


def start_stalling_stack(stack_factory: Any, **extra: str) -> tuple[Any, Any]:
    stack, _, _ = stack_factory(**{**STALL_LIMITS, **extra})
    stack.start_api()
    # The tests read the worker's log; a log of an earlier run would count too.
    stack.log("worker1").unlink(missing_ok=True)
    worker = stack.start_worker(concurrency=1, app="tests.support.stalling_app")
    return stack, worker


@pytest.mark.parametrize(
    ("marker", "killed"),
    [(FINALIZE_STALLS_IN_C, True), (FINALIZE_STALLS_IN_PYTHON, False)],
    ids=["hard-kill", "soft-limit"],
)
def test_finalize_over_the_time_limit_fails_with_the_reason(
    stack_factory: Any, tmp_path: Path, marker: str, killed: bool
) -> None:
    stack, worker = start_stalling_stack(stack_factory)
    with stack.client() as client:
        slow = submit(
            client,
            marked_pdf(tmp_path / "stalls.pdf", text=marker),
            webhook_url="http://127.0.0.1:9/hook",
        )
        assert wait_terminal(slow, JOB_BOUND_S) == "failed"
        [(code, message, attempts)] = db_rows(
            "SELECT error_code, error_message, finalize_attempts FROM jobs WHERE id = %s", slow
        )
        assert code == "finalize_failed", message
        assert "assembling the result exceeded the 12 s time limit (2 attempts)" in message
        assert attempts == 2, attempts
        # The page was read and charged before finalize began; ending the job keeps that.
        [(page_status, cost)] = db_rows(
            "SELECT status::text, cost_usd FROM pages WHERE job_id = %s", slow
        )
        assert page_status == "succeeded" and cost is not None and cost > 0
        [(event_type, body)] = db_rows(
            "SELECT type, body FROM webhook_events WHERE job_id = %s", slow
        )
        assert event_type == "job.failed"
        data = json.loads(body)["data"]
        assert float(data["cost_usd"]) > 0 and data["license_use"], data
        [(deliveries,)] = db_rows(
            "SELECT count(*) FROM webhook_deliveries d JOIN webhook_events e "
            "ON e.id = d.event_id WHERE e.job_id = %s",
            slow,
        )
        assert deliveries == 1
        follow_up = submit(client, SAMPLES / "invoice-multipage.pdf")
        assert wait_terminal(follow_up, JOB_BOUND_S) == "succeeded"
    assert worker.poll() is None
    worker_log = stack.log("worker1").read_text()
    assert ("Hard time limit (12s) exceeded" in worker_log) is killed
    # Each stop is recorded once, though Celery reports a hard kill twice.
    assert worker_log.count(f"job {slow} finalize attempt") == 2, worker_log
