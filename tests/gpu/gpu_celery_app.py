"""A Celery app for the bridge tests: the GPU worker's wiring in miniature.

The real adapter (VllmEngine -> runner -> bridge -> accountant) runs inside a
real Celery worker with a threads pool; only AsyncLLM is replaced by the
scripted double. Configured through environment variables so the test can
start it as a separate process:

PAGEMILL_TEST_REDIS_URL, PAGEMILL_TEST_QUEUE, PAGEMILL_TEST_RUN (key prefix),
PAGEMILL_TEST_SCRIPT ("backlog" or "long"), PAGEMILL_TEST_DRAIN_S,
PAGEMILL_TEST_WEIGHTS (any existing folder; the double loads nothing).
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
from celery.exceptions import Reject
from gpu_doubles import (
    MAX_NUM_SEQS,
    PAGE_TIMEOUT_S,
    Script,
    ScriptedAsyncLLM,
    ScriptedFailure,
    scan_page,
    scripted_profile,
)

from worker.bridge import BridgeClosed, BridgeTimeout
from worker.engines.base import EngineError
from worker.engines.vllm.engine import VllmEngine
from worker.engines.vllm.settings import VllmSettings

REDIS_URL = os.environ["PAGEMILL_TEST_REDIS_URL"]
QUEUE = os.environ["PAGEMILL_TEST_QUEUE"]
RUN = os.environ["PAGEMILL_TEST_RUN"]

SCRIPTS = {
    # 0.4-1.2 s a page, spread so pages do not finish in lockstep; two pages
    # fail once and two hang once (cancelled by the page timeout).
    "backlog": Script(
        seconds=lambda page: 0.4 + (page * 37 % 100) / 125,
        fail_first_attempt=frozenset({17, 63}),
        hang_first_attempt=frozenset({41, 120}),
    ),
    # Pages long enough to be caught in flight by a shutdown.
    "long": Script(seconds=lambda page: 1.5 + (page % 7) / 10),
}

app = Celery("pagemill_gpu_test", broker=REDIS_URL)
app.conf.update(
    task_default_queue=QUEUE,
    # Ack after the page is done, so a page lost with its worker is redelivered.
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    # One message per thread: the threads, not the prefetch buffer, hold the backlog.
    worker_prefetch_multiplier=1,
    broker_transport_options={"visibility_timeout": 60},
    broker_connection_retry_on_startup=True,
)

_store = redis.Redis.from_url(REDIS_URL)
_engine: VllmEngine | None = None
_engine_lock = threading.Lock()
_double: ScriptedAsyncLLM | None = None
_shutdown_thread: threading.Thread | None = None

PROFILE = scripted_profile("scripted", detect_min_repeats=3)


def engine() -> VllmEngine:
    """Created on first use inside the worker process, never in a parent."""
    global _engine, _double
    with _engine_lock:
        if _engine is None:
            _double = ScriptedAsyncLLM(
                SCRIPTS[os.environ["PAGEMILL_TEST_SCRIPT"]],
                MAX_NUM_SEQS,
                on_admit=lambda page: _store.incr(f"{RUN}:admitted"),
            )
            double = _double
            settings = VllmSettings(
                weights_path=Path(os.environ["PAGEMILL_TEST_WEIGHTS"]),
                max_num_seqs=MAX_NUM_SEQS,
                page_timeout_s=PAGE_TIMEOUT_S,
                task_time_limit_s=30,
                broker_visibility_timeout_s=60,
                drain_timeout_s=float(os.environ.get("PAGEMILL_TEST_DRAIN_S", "30")),
                settle_timeout_s=0.5,
            )
            _engine = VllmEngine(PROFILE, settings, engine_factory=lambda kwargs, loggers: double)
        return _engine


@app.task(bind=True, name="gpu_test.convert_page", max_retries=2)
def convert_page(self: Any, page: int) -> None:
    _store.incr(f"{RUN}:started")
    try:
        result = engine().convert(scan_page(page))
    except BridgeClosed as exc:
        # The worker is going down: back on the queue for the next worker.
        raise Reject(str(exc), requeue=True) from exc
    except (BridgeTimeout, ScriptedFailure, EngineError) as exc:
        raise self.retry(exc=exc, countdown=0) from exc
    record = {
        "page": page,
        "retries": self.request.retries,
        "pid": os.getpid(),
        "done_at": time.monotonic(),
        "gpu_ns": sum(a["gpu_ns"] for a in result.details["attempts"]),
        "settled": result.details["gpu_seconds_settled"],
        "output_tokens": result.output_tokens,
    }
    _store.rpush(f"{RUN}:done", json.dumps(record))


@signals.worker_shutting_down.connect
def _start_drain(**_: Any) -> None:
    # Called in the signal handler: drain on a thread so Celery's warm
    # shutdown proceeds; tasks whose pages get cancelled re-queue themselves.
    global _shutdown_thread
    if _engine is not None and _shutdown_thread is None:
        _store.rpush(
            f"{RUN}:events", json.dumps({"sigterm_at": time.monotonic(), "pid": os.getpid()})
        )
        _shutdown_thread = threading.Thread(target=_drain_engine, name="engine-drain")
        _shutdown_thread.start()


def _drain_engine() -> None:
    assert _engine is not None and _double is not None
    report = _engine.shutdown()
    usage = _engine.usage()
    _store.rpush(
        f"{RUN}:events",
        json.dumps(
            {
                "pid": os.getpid(),
                "drained": report.drained,
                "cancelled": report.cancelled,
                "drain_seconds": report.seconds,
                "engine_shut_down": _double.shut_down,
                "busy_ns": usage.busy_ns,
                "charged_ns": usage.charged_ns,
                "abandoned_ns": usage.abandoned_ns,
                "gauge": _double.gauge.samples(),
                "bridge_gauge": _engine.bridge.in_flight.samples(),
            }
        ),
    )


@signals.worker_shutdown.connect
def _wait_for_drain(**_: Any) -> None:
    if _shutdown_thread is not None:
        _shutdown_thread.join()
