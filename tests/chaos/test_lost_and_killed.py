"""Lost messages, killed workers, duplicate deliveries: one result and one charge per page."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pymupdf
import redis

from pagemill.queue import OCR_TASK, make_celery
from pagemill.settings import Settings
from pagemill.storage import JobKeys, ObjectStore
from tests.chaos.conftest import db_rows, redis_keys, wait_for, wait_terminal
from tests.conftest import SAMPLES

SCAN = SAMPLES / "scanned-invoice.png"


def scanned_pdf(tmp_path: Path, pages: int) -> Path:
    document = pymupdf.open()
    for _ in range(pages):
        page = document.new_page(width=595, height=842)
        page.insert_image(page.rect, filename=str(SCAN))
    path = tmp_path / f"scan-{pages}.pdf"
    document.save(path)
    return path


def submit(client: httpx.Client, path: Path, **data: str) -> str:
    with path.open("rb") as handle:
        response = client.post("/v1/jobs", files={"file": (path.name, handle)}, data=data)
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def page_states(job_id: str) -> list[tuple[int, str, int, Any]]:
    return [
        (row[0], row[1], row[2], row[3])
        for row in db_rows(
            "SELECT number, status::text, attempts, cost_usd FROM pages "
            "WHERE job_id = %s ORDER BY number",
            job_id,
        )
    ]


def assert_one_result_per_page(job_id: str, pages: int, s3: ObjectStore) -> None:
    states = page_states(job_id)
    assert [number for number, *_ in states] == list(range(1, pages + 1))
    for _, status, attempts, cost in states:
        assert status == "succeeded", states
        assert attempts >= 1 and cost is not None and cost > 0
    # Each page's result is the objects of the attempt its row names: its last.
    results = db_rows(
        "SELECT number, attempts, result_attempt FROM pages WHERE job_id = %s ORDER BY number",
        job_id,
    )
    for number, attempts, result_attempt in results:
        assert result_attempt == attempts, results
        assert s3.exists(JobKeys(job_id).page_markdown(number, result_attempt))
    [(rows_with_cost,)] = db_rows(
        "SELECT count(*) FROM pages WHERE job_id = %s AND cost_usd IS NOT NULL", job_id
    )
    assert rows_with_cost == pages


def test_job_finishes_after_the_broker_loses_every_message(stack_factory: Any) -> None:
    stack, _, _ = stack_factory()
    stack.start_api()
    with stack.client() as client:
        job_id = submit(client, SAMPLES / "invoice-multipage.pdf")
    assert redis_keys(stack), "the prepare message should be waiting in Redis"
    redis.Redis.from_url(stack.redis_server.url).flushall()
    assert redis_keys(stack) == []
    stack.start_worker()
    assert wait_terminal(job_id, 120) == "succeeded"


def test_kill_9_mid_page_loses_nothing(shared_stack: Any, tmp_path: Path, s3: ObjectStore) -> None:
    stack, _, _ = shared_stack
    with stack.client() as client:
        job_id = submit(client, scanned_pdf(tmp_path, 4), engine="rapidocr")
    wait_for(
        lambda: any(state[1] == "running" for state in page_states(job_id)), 60, "a running page"
    )
    stack.kill_worker(signal.SIGKILL)
    killed_while_running = [s[0] for s in page_states(job_id) if s[1] == "running"]
    assert killed_while_running
    stack.start_worker()
    assert wait_terminal(job_id, 180) == "succeeded"
    assert_one_result_per_page(job_id, 4, s3)
    # The page that was running when the worker died was claimed again.
    attempts = {number: attempts for number, _, attempts, _ in page_states(job_id)}
    assert max(attempts[number] for number in killed_while_running) >= 2


def test_duplicate_messages_give_one_result(shared_stack: Any, s3: ObjectStore) -> None:
    stack, _, _ = shared_stack
    with stack.client() as client:
        job_id = submit(client, SAMPLES / "invoice-multipage.pdf")
    assert wait_terminal(job_id, 120) == "succeeded"
    producer = make_celery(Settings(**_settings_from(stack.env)))
    page_ids = [row[0] for row in db_rows("SELECT id FROM pages WHERE job_id = %s", job_id)]
    for page_id in page_ids * 3:
        producer.send_task(OCR_TASK, args=[page_id])
    time.sleep(5)  # give the worker time to (not) run them again
    assert [attempts for _, _, attempts, _ in page_states(job_id)] == [1, 1, 1]
    assert_one_result_per_page(job_id, 3, s3)
    worker_log = stack.log_text(f"worker{stack.workers_started}")
    assert worker_log.count(f"{OCR_TASK}[") >= 9 + 3  # the duplicates were delivered


def _settings_from(env: dict[str, str]) -> dict[str, Any]:
    return {"broker_url": env["PAGEMILL_BROKER_URL"], "queue_prefix": env["PAGEMILL_QUEUE_PREFIX"]}
