"""engine=vllm with no GPU worker: refused at submit; and when the GPU workers vanish
after a job was accepted, its pages fail after the stated wait with the reason,
while the reaper never piles copies of their messages into the GPU queue."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any

import redis

from tests.chaos.conftest import Stack, db_rows, wait_for, wait_terminal
from tests.chaos.test_lost_and_killed import submit
from tests.conftest import SAMPLES
from tests.support import services

GPU_TIMINGS = {
    "PAGEMILL_WORKER_DEAD_AFTER_S": "10",
    "PAGEMILL_GPU_WORKER_WAIT_S": "15",
}


def start_gpu_double(stack: Stack) -> subprocess.Popen[bytes]:
    prefix = stack.env["PAGEMILL_QUEUE_PREFIX"]
    return services.start_worker(
        {**stack.env, "PAGEMILL_DEVICE_KIND": "nvidia-l4"},
        stack.log("gpu"),
        f"{prefix}ocr-gpu",
        concurrency=4,
        pool="threads",
        app="tests.support.gpu_double_app",
    )


def live_gpu_workers() -> int:
    [(count,)] = db_rows(
        "SELECT count(*) FROM workers WHERE engine = 'vllm' AND stopped_at IS NULL "
        "AND heartbeat_at > now() - interval '5 seconds'"
    )
    return int(count)


def test_submit_is_refused_with_no_gpu_worker(stack_factory: Any) -> None:
    stack, _, _ = stack_factory(**GPU_TIMINGS)
    stack.start_api()
    with stack.client() as client:
        path = SAMPLES / "scanned-sentence.pdf"
        with path.open("rb") as handle:
            response = client.post(
                "/v1/jobs", files={"file": (path.name, handle)}, data={"engine": "vllm"}
            )
    assert response.status_code == 409, response.text
    assert response.json()["error"]["code"] == "no_gpu_worker", response.text
    assert db_rows("SELECT id FROM jobs") == []


def test_pages_fail_when_gpu_workers_vanish_and_the_queue_does_not_grow(
    stack_factory: Any,
) -> None:
    stack, _, _ = stack_factory(**GPU_TIMINGS)
    stack.start_api()
    stack.start_worker()
    gpu = start_gpu_double(stack)
    wait_for(lambda: live_gpu_workers() == 1, 60, "the GPU worker's registration")
    os.killpg(gpu.pid, signal.SIGKILL)
    gpu.wait(10)
    with stack.client() as client:
        job_id = submit(client, SAMPLES / "invoice-multipage.pdf", engine="vllm")
    gpu_queue = f"{stack.env['PAGEMILL_QUEUE_PREFIX']}ocr-gpu"
    broker = redis.Redis.from_url(stack.redis_server.url)
    lengths = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        lengths.append(int(broker.llen(gpu_queue)))  # type: ignore[arg-type]
        [(status,)] = db_rows("SELECT status::text FROM jobs WHERE id = %s", job_id)
        if status != "running" and status != "queued":
            break
        time.sleep(0.5)
    assert wait_terminal(job_id, 5) == "failed"
    # Three pages, each published once: the reaper ran every second meanwhile, with
    # queued work stale after 3 s, and added no copies.
    assert max(lengths) <= 3, lengths
    [(code, message)] = db_rows("SELECT error_code, error_message FROM jobs WHERE id = %s", job_id)
    assert code == "pages_failed"
    assert "no GPU worker" in message and "15 s" in message, message
    pages = db_rows("SELECT status::text FROM pages WHERE job_id = %s", job_id)
    assert [status for (status,) in pages] == ["failed"] * 3
    # The failed pages' messages are taken out of the GPU queue.
    assert broker.llen(gpu_queue) == 0
