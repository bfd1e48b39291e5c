"""The worker's Celery application: the shared configuration plus the tasks.

Start with `pagemill worker --queues prepare,ocr,finalize`. CPU engines run in a
prefork pool (PyMuPDF is not thread-safe); each child loads its models lazily.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery.signals import worker_process_init, worker_ready, worker_shutdown

from pagemill.db.session import get_engine, session_factory
from pagemill.jobs.reaper import start_reaper_thread
from pagemill.queue import make_celery
from pagemill.settings import get_settings

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")

app = make_celery(get_settings())
app.conf.include = ["worker.tasks", "worker.webhook_tasks"]

_reaper_stop: threading.Event | None = None


@worker_process_init.connect
def _prepare_child(**_: Any) -> None:
    # A forked child must not share the parent's pooled sockets: drop them unclosed.
    get_engine().dispose(close=False)
    # Import the heavy libraries now, not inside a task: a time limit that fires
    # during an import leaves a half-initialised module behind for good.
    import pymupdf  # noqa: F401
    import pymupdf4llm  # noqa: F401

    import worker.engines.rapidocr
    import worker.engines.textlayer  # noqa: F401


@worker_ready.connect
def _start_reaper(**_: Any) -> None:
    global _reaper_stop
    _reaper_stop = start_reaper_thread(session_factory(), get_settings())


@worker_shutdown.connect
def _stop_reaper(**_: Any) -> None:
    if _reaper_stop is not None:
        _reaper_stop.set()
