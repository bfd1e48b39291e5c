"""The production worker, with two things a test drives from outside, for the
multi-host tests: `celery -A tests.multihost.held_app worker ...`. Production code
never imports this module.

- Hold: while the file HOLD_FILE exists in this host's own temporary directory, a
  page that reaches its engine waits there (its id in HOLDING_FILE), so a test can
  cut the host off, or let the other host work, while this one holds a page.
- Clock: PAGEMILL_TEST_CLOCK_OFFSET_S moves this process's wall clock (time.time,
  datetime.now and the rest; not the monotonic clocks) by that many seconds, as a
  host whose clock is off would see it. Set before Celery and kombu run, and
  inherited by the pool's forked children.
"""

from __future__ import annotations

import os
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import time_machine
from celery import current_task

HOLD_FILE = "pagemill-hold-pages"
HOLDING_FILE = "pagemill-holding-page"
CLOCK_OFFSET_VARIABLE = "PAGEMILL_TEST_CLOCK_OFFSET_S"

_offset_s = float(os.environ.get(CLOCK_OFFSET_VARIABLE, "0"))
if _offset_s:
    time_machine.travel(datetime.now(UTC) + timedelta(seconds=_offset_s), tick=True).start()

from worker.celery_app import app  # noqa: E402  (after the clock moved)
from worker.engines.base import EngineResult, PageInput  # noqa: E402
from worker.stages import ocr  # noqa: E402

_real_convert = ocr._convert


def _held_convert(engine_name: str, page: PageInput) -> EngineResult:
    hold = Path(tempfile.gettempdir()) / HOLD_FILE
    if hold.exists():
        # Says which page is held, for the test to find its row.
        holding = Path(tempfile.gettempdir()) / HOLDING_FILE
        holding.write_text(str(current_task.request.args[0]))
        while hold.exists():
            time.sleep(0.05)
        holding.unlink(missing_ok=True)
    return _real_convert(engine_name, page)


ocr._convert = _held_convert
__all__ = ["app"]
