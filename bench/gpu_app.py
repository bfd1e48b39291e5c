"""The benchmark's GPU worker: `celery -A bench.gpu_app worker --pool threads`.

The GPU worker's wiring (a threads pool whose threads block on one engine
through the bridge) with a task that converts a page and records when it
finished. Runs in .venv-vllm, which has no database or S3 clients, so the task
stands for the `ocr` task's engine call, not its bookkeeping (figure 1 measures
that). Configured by environment:

PAGEMILL_BENCH_REDIS_URL, PAGEMILL_BENCH_QUEUE,
PAGEMILL_BENCH_WEIGHTS (the tiny model), PAGEMILL_BENCH_GLM_WEIGHTS (the tiny
GLM-OCR), PAGEMILL_BENCH_MAX_NUM_SEQS,
PAGEMILL_BENCH_SMOKE ("1" for the fast stand-in). Each task names its engine
("vllm", "glm" or "standin"); each engine is created on its first page.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import redis
from celery import Celery, signals

from bench import gpu_engines

REDIS_URL = os.environ["PAGEMILL_BENCH_REDIS_URL"]
QUEUE = os.environ["PAGEMILL_BENCH_QUEUE"]

app = Celery("pagemill_bench_gpu", broker=REDIS_URL)
app.conf.update(
    task_default_queue=QUEUE,
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    task_ignore_result=True,
)

_store = redis.Redis.from_url(REDIS_URL)
_built: dict[str, gpu_engines.Built] = {}
_lock = threading.Lock()


def built(mode: str) -> gpu_engines.Built:
    """Created on first use inside the worker process, never in a parent."""
    with _lock:
        if mode not in _built:
            standin = (
                gpu_engines.STANDIN_SMOKE
                if os.environ.get("PAGEMILL_BENCH_SMOKE") == "1"
                else gpu_engines.STANDIN_FULL
            )
            weights = os.environ[
                "PAGEMILL_BENCH_GLM_WEIGHTS" if mode == "glm" else "PAGEMILL_BENCH_WEIGHTS"
            ]
            engine = gpu_engines.build(
                mode,
                weights=Path(weights),
                max_num_seqs=int(os.environ["PAGEMILL_BENCH_MAX_NUM_SEQS"]),
                standin=standin,
            )
            engine.start()
            _built[mode] = engine
        return _built[mode]


@app.task(name="pagemill_bench.gpu_page")
def gpu_page(mode: str, index: int, batch: str) -> None:
    result = built(mode).engine.convert(gpu_engines.page_input(mode, index))
    record = {"index": index, "done_at": time.monotonic(), "tokens": result.output_tokens}
    _store.rpush(batch, json.dumps(record))


@app.task(name="pagemill_bench.gpu_report")
def gpu_report(mode: str, batch: str) -> None:
    engine = built(mode)
    report: dict[str, Any] = {
        "bridge_in_flight": engine.engine.bridge.in_flight.samples(),
        "admitted": engine.admitted,
    }
    if engine.gauge is not None:
        report["batch_per_step"] = engine.gauge.samples()
    _store.rpush(batch, json.dumps(report))


@signals.worker_shutting_down.connect
def _drain(**_: Any) -> None:
    for engine in _built.values():
        threading.Thread(target=engine.engine.shutdown, kwargs={"drain_timeout_s": 0}).start()
