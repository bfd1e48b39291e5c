"""A document whose preparing outlives the task time limit: the stop counts as a
prepare failure with its reason, the job fails after PAGEMILL_PREPARE_MAX_FAILURES
attempts, and the worker is free for the next job.

The worker runs with a 20 s hard limit and a soft limit 8 s before it; the renderer's
own timeout (15 s) lies between them. The document is one page of 300,000 full-page
strokes read by OCR, so prepare renders it to an image, which takes MuPDF minutes in
the sandboxed child: the soft limit stops the task while it waits for that child.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.chaos.conftest import db_rows, wait_terminal
from tests.chaos.test_lost_and_killed import submit
from tests.chaos.test_slow_finalize import marked_pdf, start_stalling_stack
from tests.chaos.test_slow_page import SLOW_LIMITS, heavy_vector_pdf
from tests.conftest import SAMPLES
from tests.support.stalling_app import PREPARE_STALLS_IN_C

# Generous on a shared 2-core machine: two attempts stopped at 12 s, 5 s apart.
JOB_BOUND_S = 120


def test_prepare_over_the_time_limit_fails_with_the_reason(
    stack_factory: Any, tmp_path: Path
) -> None:
    stack, _, _ = stack_factory(**SLOW_LIMITS, PAGEMILL_PREPARE_MAX_FAILURES="2")
    stack.start_api()
    worker = stack.start_worker(concurrency=1)
    with stack.client() as client:
        slow = submit(client, heavy_vector_pdf(tmp_path / "heavy.pdf"), engine="rapidocr")
        assert wait_terminal(slow, JOB_BOUND_S) == "failed"
        [(code, message, attempts, failures)] = db_rows(
            "SELECT error_code, error_message, prepare_attempts, prepare_failures "
            "FROM jobs WHERE id = %s",
            slow,
        )
        assert code == "prepare_failed", message
        assert "preparing the document exceeded the 20 s time limit" in message
        assert "None" not in message
        assert attempts == 2 and failures == 2, (attempts, failures)
        follow_up = submit(client, SAMPLES / "invoice-multipage.pdf")
        assert wait_terminal(follow_up, JOB_BOUND_S) == "succeeded"
    assert worker.poll() is None


def test_prepare_killed_at_the_hard_limit_fails_with_the_reason(
    stack_factory: Any, tmp_path: Path
) -> None:
    """The prepare stalls where the soft limit cannot reach it (tests.support.stalling_app),
    so the worker's main process records each hard kill and publishes the retry."""
    stack, worker = start_stalling_stack(stack_factory, PAGEMILL_PREPARE_MAX_FAILURES="2")
    with stack.client() as client:
        stuck = submit(client, marked_pdf(tmp_path / "stuck.pdf", title=PREPARE_STALLS_IN_C))
        assert wait_terminal(stuck, JOB_BOUND_S) == "failed"
        [(code, message, attempts, failures)] = db_rows(
            "SELECT error_code, error_message, prepare_attempts, prepare_failures "
            "FROM jobs WHERE id = %s",
            stuck,
        )
        assert code == "prepare_failed", message
        assert "preparing the document exceeded the 12 s time limit (2 attempts)" in message
        assert attempts == 2 and failures == 2, (attempts, failures)
        follow_up = submit(client, SAMPLES / "invoice-multipage.pdf")
        assert wait_terminal(follow_up, JOB_BOUND_S) == "succeeded"
    assert worker.poll() is None
    assert stack.log("worker1").read_text().count("Hard time limit (12s) exceeded") == 2
