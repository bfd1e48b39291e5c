"""A CPU worker whose stages stall on marked documents, for time-limit tests: the
production Celery app and stages, with prepare's renderer call and finalize's
assembly wrapped. Start it with `celery -A tests.support.stalling_app worker ...`.
Production code never imports this module.

A document stalls a stage when it carries that stage's marker: prepare checks the
stored source's bytes (the marker in the PDF's title), finalize the pages' Markdown
(the marker as a line of text). It stalls "in C" with the soft time limit's signal
(and SIGTERM) blocked, as a thread stuck in a C call that never returns to the
interpreter, so only the hard limit's SIGKILL ends it; or "in Python", where the
soft limit interrupts it.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pagemill.quality.furniture import FurnitureMode
from worker import pipeline
from worker.celery_app import app
from worker.stages import finalize, prepare

PREPARE_STALLS_IN_C = "prepare stalls in C"
FINALIZE_STALLS_IN_C = "finalize stalls in C"
FINALIZE_STALLS_IN_PYTHON = "finalize stalls in Python"
# Longer than any time limit a test sets: a stall ends only by the limit.
STALL_S = 600


def _stall(in_c: bool) -> None:
    if in_c:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGTERM})
    time.sleep(STALL_S)


def _run_sandboxed(
    module: str, args: list[str], limits: Any, idle: Any = None
) -> Iterator[dict[str, Any]]:
    if PREPARE_STALLS_IN_C.encode() in Path(args[0]).read_bytes():
        _stall(in_c=True)
    yield from _real_run_sandboxed(module, args, limits, idle)


def _assemble_document(
    pages: list[tuple[int, str | None]], furniture: FurnitureMode = FurnitureMode.separate
) -> pipeline.AssembledDocument:
    text = "\n".join(markdown or "" for _, markdown in pages)
    if FINALIZE_STALLS_IN_C in text:
        _stall(in_c=True)
    if FINALIZE_STALLS_IN_PYTHON in text:
        _stall(in_c=False)
    return pipeline.assemble_document(pages, furniture)


_real_run_sandboxed = prepare.run_sandboxed
prepare.run_sandboxed = _run_sandboxed  # type: ignore[assignment]
finalize.assemble_document = _assemble_document
__all__ = ["app"]
