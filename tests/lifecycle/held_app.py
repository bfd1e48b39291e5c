"""A CPU worker that holds every page in front of its engine, and every finalize before
it assembles the document, until the test releases them: the production Celery app and
stages, with the engine call and the assembly wrapped. A test can then act (purge,
cancel) while a real worker holds work, and let the worker finish it afterwards. Start it
with `celery -A tests.lifecycle.held_app worker ...`.

The directory in PAGEMILL_TEST_HOLD_DIR carries the signals: the worker touches
`page-<n>.held` when it holds page n and goes on once `release` exists, and touches
`finalize.held` when it holds a finalize and goes on once `release-finalize` exists.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from pagemill.quality.furniture import FurnitureMode
from worker import pipeline
from worker.celery_app import app
from worker.engines.base import EngineResult, PageInput
from worker.stages import finalize, ocr

HOLD_DIR = Path(os.environ["PAGEMILL_TEST_HOLD_DIR"])
# Longer than any test waits; the page then goes on as if released.
HOLD_LIMIT_S = 120


def _hold(held: str, release: str) -> None:
    (HOLD_DIR / held).touch()
    deadline = time.monotonic() + HOLD_LIMIT_S
    while not (HOLD_DIR / release).exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def _held_convert(engine_name: str, page: PageInput) -> EngineResult:
    _hold(f"page-{page.facts.number}.held", "release")
    return _real_convert(engine_name, page)


def _held_assemble(
    pages: list[tuple[int, str | None]], furniture: FurnitureMode = FurnitureMode.separate
) -> pipeline.AssembledDocument:
    _hold("finalize.held", "release-finalize")
    return pipeline.assemble_document(pages, furniture)


_real_convert = ocr._convert
ocr._convert = _held_convert
finalize.assemble_document = _held_assemble
__all__ = ["app"]
