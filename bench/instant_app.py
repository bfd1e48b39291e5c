"""The production worker with an instant engine, for the orchestration benchmark.

`celery -A bench.instant_app worker ...`: the real Celery app, tasks, stages,
database, S3 and finalize, with the engine registered as "rapidocr" replaced by
one that returns a fixed page at once. Jobs reach it with `engine=rapidocr`.
Production code never imports this module (it lives outside the installed
packages), so the instant engine cannot be selected there.
"""

from __future__ import annotations

from worker.celery_app import app
from worker.engines import registry
from worker.engines.base import EngineResult, PageInput


class InstantEngine:
    name = "rapidocr"
    render_dpi = 150

    def convert(self, page: PageInput) -> EngineResult:
        return EngineResult(
            markdown=f"# Page {page.facts.number}\n\nA fixed page from the instant engine.\n",
            device_seconds=0.0,
            device_kind="cpu",
            finish_reason="stop",
        )


# Set in the parent before the pool forks, so every child inherits it.
registry._engines["rapidocr"] = InstantEngine()
__all__ = ["app"]
