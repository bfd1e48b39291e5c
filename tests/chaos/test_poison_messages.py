"""Garbage on any queue, whoever wrote it, is parked and counted; the workers that
read it live on and keep working."""

from __future__ import annotations

import base64
import json
import subprocess
import time
from typing import Any

import httpx
import redis

from pagemill.dead_letter import DEAD_LETTER, Reason, parked
from pagemill.ops.metrics import QUEUE_STAGES
from pagemill.queue import OCR_TASK, PREPARE_TASK, make_celery
from pagemill.settings import Settings
from tests.chaos.conftest import Stack, wait_for, wait_terminal
from tests.chaos.test_lost_and_killed import submit
from tests.conftest import SAMPLES
from tests.support import services

JOB_ID = "4b0a3c4e-8f1e-4f57-9a55-2c1c0b5b8a10"
GPU_STAGES = ("ocr-gpu", "ocr-gpu-commercial")


def stack_settings(stack: Stack) -> Settings:
    return Settings(
        broker_url=stack.env["PAGEMILL_BROKER_URL"],
        queue_prefix=stack.env["PAGEMILL_QUEUE_PREFIX"],
    )


def real_message(stack: Stack, client: redis.Redis) -> dict[str, Any]:
    settings = stack_settings(stack)
    scratch = settings.queue("scratch")
    make_celery(settings).send_task(PREPARE_TASK, args=[JOB_ID], queue=scratch)
    raw = client.rpop(scratch)
    assert isinstance(raw, bytes)
    return dict(json.loads(raw))


def poison(good: dict[str, Any]) -> list[bytes]:
    """Raw garbage, and task messages broken in each way that used to stop a worker."""

    def task(body: Any, **headers: Any) -> bytes:
        envelope = json.loads(json.dumps(good))
        envelope["body"] = base64.b64encode(json.dumps(body).encode()).decode()
        envelope["headers"].update(headers)
        return json.dumps(envelope).encode()

    return [
        b'"x"',
        b"not json",
        b"[]",
        b"\xff\xfe\x00\x01\x80raw bytes",
        b"{}",
        json.dumps({**good, "properties": "x"}).encode(),
        json.dumps({**good, "headers": None}).encode(),
        json.dumps({**good, "body": "!!!"}).encode(),
        json.dumps({**good, "content-type": "application/x-python-serialize"}).encode(),
        task([1]),
        task([[JOB_ID], {}, "x"]),
        task([[JOB_ID], {}, {}], id=None),
        task([[JOB_ID], {}, {}], eta="not a date"),
        task([[], [], {}]),
        task([["a", "b"], {}, {}]),
        task([["not-a-uuid"], {}, {}]),
        task([["7"], {}, {}], task=OCR_TASK),
        task([[JOB_ID], {}, {}], task="pagemill.no_such_task"),
    ]


def start_gpu_queue_worker(stack: Stack) -> subprocess.Popen[bytes]:
    """The GPU queues' consumer, as GPU workers run it (threads); it never gets as far
    as loading a model here, since nothing valid reaches it."""
    prefix = stack.env["PAGEMILL_QUEUE_PREFIX"]
    env = {**stack.env, "PAGEMILL_COMMERCIAL_LICENSE_REFERENCE": "test-contract-1"}
    process = services.start_worker(
        env,
        stack.log("gpu-queues-worker"),
        ",".join(prefix + stage for stage in GPU_STAGES),
        concurrency=2,
        pool="threads",
    )
    stack.processes["gpu-queues-worker"] = process
    return process


def start_cpu_queue_worker(stack: Stack) -> subprocess.Popen[bytes]:
    prefix = stack.env["PAGEMILL_QUEUE_PREFIX"]
    stages = [stage for stage in QUEUE_STAGES if stage not in GPU_STAGES]
    process = services.start_worker(
        stack.env, stack.log("cpu-queues-worker"), ",".join(prefix + stage for stage in stages)
    )
    stack.processes["worker"] = process
    return process


def poison_metric(api_url: str, queue: str) -> float:
    text = httpx.get(f"{api_url}/metrics", timeout=30).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("pagemill_poison_messages_total{") and f'queue="{queue}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_poison_on_every_queue_is_parked_and_counted_and_workers_live(
    stack_factory: Any,
) -> None:
    stack, _, _ = stack_factory()
    stack.start_api()
    workers = [start_cpu_queue_worker(stack), start_gpu_queue_worker(stack)]
    client = redis.Redis.from_url(stack.redis_server.url)
    settings = stack_settings(stack)
    payloads = poison(real_message(stack, client))

    for stage in QUEUE_STAGES:
        for raw in payloads:
            client.lpush(settings.queue(stage), raw)
    expected = len(payloads) * len(QUEUE_STAGES)
    wait_for(
        lambda: client.llen(settings.queue(DEAD_LETTER)) >= expected, 120, "every message parked"
    )
    time.sleep(2)  # anything still on its way to a worker would show by now
    for worker in workers:
        assert worker.poll() is None, "a worker died of a message"
    for stage in QUEUE_STAGES:
        assert client.llen(settings.queue(stage)) == 0, f"{stage} still holds messages"

    records = parked(client, settings)
    assert len(records) == expected
    kept = {(r["queue"], base64.b64decode(str(r["message_base64"]))) for r in records}
    assert kept == {(settings.queue(s), raw) for s in QUEUE_STAGES for raw in payloads}
    reasons = {str(r["reason"]) for r in records}
    assert reasons == {
        Reason.undecodable,
        Reason.not_a_message,
        Reason.not_a_task,
        Reason.bad_arguments,
    }
    for stage in QUEUE_STAGES:
        assert poison_metric(stack.api_url, settings.queue(stage)) == len(payloads)

    with stack.client() as api:
        job_id = submit(api, SAMPLES / "invoice-multipage.pdf")
    assert wait_terminal(job_id, 180) == "succeeded"
    for worker in workers:
        assert worker.poll() is None
    for name in ("cpu-queues-worker", "gpu-queues-worker"):
        log = stack.log(name).read_text()
        assert "Unrecoverable error" not in log and "Connection to broker lost" not in log
