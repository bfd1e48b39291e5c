"""A job cancelled while its pages are in a worker's hands: the pages read before the
cancel keep their charge, the page being read when it came is not charged and its late
result changes nothing, and the job ends once, with one event."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from tests.chaos.conftest import db_rows, wait_for, wait_terminal
from tests.chaos.test_lost_and_killed import page_states, scanned_pdf, submit


def test_a_cancel_mid_page_ends_the_job_once_and_charges_only_finished_pages(
    shared_stack: Any, tmp_path: Path
) -> None:
    stack, _, _ = shared_stack
    with stack.client() as client:
        job_id = submit(
            client, scanned_pdf(tmp_path, 4), engine="rapidocr", webhook_url="http://127.0.0.1:9/"
        )
        wait_for(
            lambda: any(state[1] == "running" for state in page_states(job_id)),
            60,
            "a running page",
        )
        assert client.delete(f"/v1/jobs/{job_id}").status_code == 200
    in_flight = db_rows(
        "SELECT id FROM pages WHERE job_id = %s AND finished_at IS NOT NULL "
        "AND status = 'cancelled' AND started_at IS NOT NULL",
        job_id,
    )
    assert wait_terminal(job_id, 10) == "cancelled"
    # The attempts under way at the cancel run to their end and find their page taken.
    for (page_id,) in in_flight:
        wait_for(
            lambda page_id=page_id: (
                re.search(
                    rf"page {page_id} attempt \d+ lost its claim",
                    stack.log_text(f"worker{stack.workers_started}"),
                )
                is not None
            ),
            90,
            f"page {page_id}'s attempt to end",
        )
    time.sleep(5)  # past the reaper's stale period: it finds nothing to publish again

    assert in_flight, "the cancel came after every page had ended"
    states = page_states(job_id)
    assert all(status in ("succeeded", "cancelled") for _, status, _, _ in states), states
    for _, status, _, cost in states:
        assert (cost is not None and cost > 0) if status == "succeeded" else cost is None, states
    [(status, code, attempts)] = db_rows(
        "SELECT status::text, error_code, finalize_attempts FROM jobs WHERE id = %s", job_id
    )
    assert (status, code, attempts) == ("cancelled", "cancelled", 0)
    events = db_rows("SELECT type FROM webhook_events WHERE job_id = %s", job_id)
    assert events == [("job.cancelled",)]
    [(deliveries,)] = db_rows(
        "SELECT count(*) FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id "
        "WHERE e.job_id = %s",
        job_id,
    )
    assert deliveries == 1
