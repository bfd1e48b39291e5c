"""Redis restarted, Postgres and S3 unreachable mid-run: work resumes, nothing stays running."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

from pagemill.storage import ObjectStore
from tests.chaos.conftest import db_rows, wait_for, wait_terminal
from tests.chaos.test_lost_and_killed import (
    assert_one_result_per_page,
    page_states,
    scanned_pdf,
    submit,
)


def nothing_running(job_id: str) -> bool:
    return not any(state[1] in ("running", "queued") for state in page_states(job_id))


def some_pages_done(job_id: str) -> bool:
    return any(state[1] == "succeeded" for state in page_states(job_id))


def test_redis_restart_mid_run(shared_stack: Any, tmp_path: Path, s3: ObjectStore) -> None:
    stack, _, _ = shared_stack
    with stack.client() as client:
        job_id = submit(client, scanned_pdf(tmp_path, 5), engine="rapidocr")
    wait_for(lambda: some_pages_done(job_id), 90, "a finished page")
    stack.redis_server.stop()  # no persistence: every queued message is gone
    time.sleep(3)
    stack.redis_server.start()
    assert wait_terminal(job_id, 180) == "succeeded"
    assert nothing_running(job_id)
    assert_one_result_per_page(job_id, 5, s3)


def test_postgres_unreachable_mid_run(shared_stack: Any, tmp_path: Path, s3: ObjectStore) -> None:
    stack, db_proxy, _ = shared_stack
    with stack.client() as client:
        job_id = submit(client, scanned_pdf(tmp_path, 5), engine="rapidocr")
    wait_for(lambda: some_pages_done(job_id), 90, "a finished page")
    db_proxy.cut()  # every open connection dropped, new ones refused: a restart, seen from outside
    time.sleep(10)
    db_proxy.restore()
    assert wait_terminal(job_id, 180) == "succeeded"
    assert nothing_running(job_id)
    assert_one_result_per_page(job_id, 5, s3)


def test_s3_unreachable_for_30_seconds(shared_stack: Any, tmp_path: Path, s3: ObjectStore) -> None:
    stack, _, s3_proxy = shared_stack
    with stack.client() as client:
        job_id = submit(client, scanned_pdf(tmp_path, 5), engine="rapidocr")
    wait_for(lambda: some_pages_done(job_id), 90, "a finished page")
    s3_proxy.cut()
    time.sleep(30)
    s3_proxy.restore()
    assert wait_terminal(job_id, 240) == "succeeded"
    assert nothing_running(job_id)
    assert_one_result_per_page(job_id, 5, s3)
    worker_log = stack.log_text(f"worker{stack.workers_started}")
    assert "outage, retrying" in worker_log  # the outage was seen and ridden out


def test_s3_gone_for_good_fails_with_the_reason(stack_factory: Any, tmp_path: Path) -> None:
    # Retries are bounded: one in-task retry, three claims, then the page fails and says why.
    stack, _, s3_proxy = stack_factory(
        s3_proxy=True, PAGEMILL_OUTAGE_RETRIES="1", PAGEMILL_MAX_CLAIMS="3"
    )
    stack.start_api()
    stack.start_worker()
    with stack.client() as client:
        job_id = submit(client, scanned_pdf(tmp_path, 1), engine="rapidocr")
    wait_for(lambda: bool(page_states(job_id)), 60, "the page to be prepared")
    s3_proxy.cut()
    assert wait_terminal(job_id, 240) == "failed"
    [(code, message)] = db_rows("SELECT error_code, error_message FROM jobs WHERE id = %s", job_id)
    [(page_error,)] = db_rows("SELECT error FROM pages WHERE job_id = %s", job_id)
    assert "unreachable" in page_error or "Object storage" in page_error, page_error
    assert code in ("pages_failed", "result_not_stored")
    assert "storage" in message.lower() or "unreachable" in message.lower(), message


def test_sigterm_mid_task_finishes_or_requeues(
    shared_stack: Any, tmp_path: Path, s3: ObjectStore
) -> None:
    stack, _, _ = shared_stack
    first = stack.processes["worker"]
    with stack.client() as client:
        job_id = submit(client, scanned_pdf(tmp_path, 4), engine="rapidocr")
    wait_for(
        lambda: any(state[1] == "running" for state in page_states(job_id)), 60, "a running page"
    )
    stack.kill_worker(signal.SIGTERM)  # warm shutdown: finish what runs, return the rest
    first.wait(60)
    assert first.returncode is not None
    stranded = [state for state in page_states(job_id) if state[1] == "running"]
    assert stranded == [], "a warm shutdown must not leave a page running"
    stack.start_worker()
    assert wait_terminal(job_id, 180) == "succeeded"
    assert_one_result_per_page(job_id, 4, s3)


def test_a_submission_while_s3_is_down_is_refused_and_leaves_nothing(
    shared_stack: Any, tmp_path: Path
) -> None:
    """503 storage_unavailable with Retry-After, not a 500; no job row, and its
    idempotency key is free again, so the same request succeeds once S3 is back."""
    stack, _, s3_proxy = shared_stack
    document = scanned_pdf(tmp_path, 1)
    headers = {"Idempotency-Key": "outage-submission"}
    [(jobs_before,)] = db_rows("SELECT count(*) FROM jobs")
    s3_proxy.cut()
    try:
        with stack.client() as client, document.open("rb") as handle:
            refused = client.post(
                "/v1/jobs", files={"file": (document.name, handle)}, headers=headers
            )
    finally:
        s3_proxy.restore()
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "storage_unavailable"
    assert "nothing was created" in refused.json()["error"]["message"]
    assert int(refused.headers["Retry-After"]) > 0
    assert db_rows("SELECT count(*) FROM jobs") == [(jobs_before,)]

    with stack.client() as client, document.open("rb") as handle:
        accepted = client.post("/v1/jobs", files={"file": (document.name, handle)}, headers=headers)
    assert accepted.status_code == 202, accepted.text
    assert wait_terminal(accepted.json()["id"], 180) == "succeeded"
