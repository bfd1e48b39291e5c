"""The worker's Celery application: the shared configuration plus the tasks.

CPU workers: `pagemill worker --queues prepare,ocr,finalize,webhooks --pool prefork`
(PyMuPDF is not thread-safe; each child loads its models lazily). GPU workers: one
process per GPU, `--queues ocr-gpu[,ocr-gpu-commercial] --pool threads
--concurrency 40`: the threads block on one vLLM engine owned by one event loop, so
40 threads keep its 32 batch slots full.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any
from urllib.parse import urlsplit

from celery.signals import (
    worker_init,
    worker_process_init,
    worker_ready,
    worker_shutdown,
    worker_shutting_down,
)

from pagemill.db.session import session_factory
from pagemill.documents.sandbox import start_fork_server
from pagemill.domain import Stage
from pagemill.engines import catalog
from pagemill.forks import release_inherited_connections
from pagemill.jobs.reaper import start_reaper_thread
from pagemill.queue import make_celery
from pagemill.settings import get_settings
from worker import broker, registration
from worker.engines.registry import created_engine

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
log = logging.getLogger(__name__)

app = make_celery(get_settings())
app.conf.include = ["worker.tasks", "worker.webhook_tasks"]
if urlsplit(get_settings().broker_url).scheme in ("redis", "rediss"):
    # Every message is screened as it comes off a queue, so none can stop the worker.
    app.conf.broker_transport = broker.TRANSPORT
# A new pool child imports the OCR engines and starts its fork server before it
# reports for work; on a busy host that takes longer than Celery's default of 4 s,
# and a child killed for it is replaced by one just as slow.
app.conf.worker_proc_alive_timeout = 60

_stops: list[threading.Event] = []
_engine_shutdown: threading.Thread | None = None


@worker_init.connect
def _choose_id(**_: Any) -> None:
    # In the parent, before the pool forks: children inherit the id.
    registration.choose_worker_id()


@worker_process_init.connect
def _prepare_child(**_: Any) -> None:
    # Every pool child (the first ones, and each replacement after a kill or after
    # its task quota) is forked from a parent holding live Postgres and Redis
    # connections: none of them may be used, or kept open, here.
    release_inherited_connections()
    if _consumes(Stage.ocr):
        load_cpu_engines()

    # Documents are opened in children forked from this child's own fork server.
    start_fork_server()


def load_cpu_engines() -> None:
    """Import the engines now, not inside a task: a time limit that fires during an
    import leaves a half-initialised module behind for good. A worker that only prepares
    or finalizes never loads them (about 130 MB a child)."""
    from worker.engines.onnx_threads import cap_session_threads

    # Before pymupdf: importing it loads its layout models (worker.engines.onnx_threads).
    cap_session_threads(get_settings().cpu_engine_threads)
    import pymupdf  # noqa: F401

    import worker.engines.rapidocr
    import worker.engines.textlayer  # noqa: F401


def _consumes(stage: Stage) -> bool:
    queues = app.amqp.queues.consume_from or app.amqp.queues
    return get_settings().queue(stage) in queues


@worker_ready.connect
def _register_and_reap(sender: Any = None, **_: Any) -> None:
    settings = get_settings()
    sessions = session_factory()
    queues = list(app.amqp.queues.consume_from or app.amqp.queues)
    entry = registration.build_registration(queues, settings)
    refusal = registration.refuse_unlicensed_commercial_queue(entry, settings)
    if refusal is not None:
        log.critical("refusing to start: %s", refusal)
        os._exit(78)  # EX_CONFIG: a supervisor should not restart this as is
    _stops.append(registration.start_heartbeat(sessions, entry, settings))
    _stops.append(start_reaper_thread(sessions, settings))


@worker_shutting_down.connect
def _drain_gpu_engine(**_: Any) -> None:
    # Drain the GPU engine on its own thread: pages in flight finish, the rest are
    # refused and go back to the queue (see worker.bridge).
    global _engine_shutdown
    # A worker runs at most one GPU engine: the one its queues are for.
    created = (created_engine(name) for name in sorted(catalog.GPU_ENGINES))
    engine = next((engine for engine in created if engine is not None), None)
    if engine is not None and hasattr(engine, "shutdown"):
        _engine_shutdown = threading.Thread(target=engine.shutdown, name="pagemill-gpu-drain")
        _engine_shutdown.start()


@worker_shutdown.connect
def _stop_threads(**_: Any) -> None:
    if _engine_shutdown is not None:
        _engine_shutdown.join()
    for stop in _stops:
        stop.set()
    worker = registration.worker_id()
    if worker is not None:
        registration.stop_heartbeat(session_factory(), threading.Event(), worker)
