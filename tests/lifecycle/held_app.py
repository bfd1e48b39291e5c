"""A CPU worker whose OCR stage holds every page in front of its engine until the test
releases it: the production Celery app and stages, with the engine call wrapped. A test
can then act (purge, cancel) while a real worker holds a page, and let the worker finish
it afterwards. Start it with `celery -A tests.lifecycle.held_app worker ...`.

The directory in PAGEMILL_TEST_HOLD_DIR carries the signals: the worker touches
`page-<n>.held` when it holds page n, and goes on once `release` exists.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from worker.celery_app import app
from worker.engines.base import EngineResult, PageInput
from worker.stages import ocr

HOLD_DIR = Path(os.environ["PAGEMILL_TEST_HOLD_DIR"])
# Longer than any test waits; the page then goes on as if released.
HOLD_LIMIT_S = 120


def _held_convert(engine_name: str, page: PageInput) -> EngineResult:
    (HOLD_DIR / f"page-{page.facts.number}.held").touch()
    deadline = time.monotonic() + HOLD_LIMIT_S
    while not (HOLD_DIR / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return _real_convert(engine_name, page)


_real_convert = ocr._convert
ocr._convert = _held_convert
__all__ = ["app"]
