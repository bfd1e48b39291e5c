"""The production worker with an instant engine, for the orchestration benchmark.

`celery -A bench.instant_app worker ...`: the real Celery app, tasks, stages,
database, S3 and finalize, with the engine registered as "rapidocr" replaced by
one that returns a fixed page at once. Jobs reach it with `engine=rapidocr`.
Production code never imports this module (it lives outside the installed
packages), so the instant engine cannot be selected there.

With PAGEMILL_BENCH_ROUNDTRIPS_KEY set, each task's Postgres round trips and CPU
are counted by stage (bench/roundtrips.py).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from celery.signals import task_postrun, task_prerun

from bench import roundtrips
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

_clocks: dict[str, roundtrips.StageClock] = {}


@lru_cache(maxsize=1)
def _redis() -> Any:
    import redis

    from pagemill.settings import get_settings

    return redis.Redis.from_url(get_settings().broker_url)


def _on_task_start(task_id: str | None = None, task: Any = None, **_: Any) -> None:
    if task_id is not None and task is not None:
        _clocks[task_id] = roundtrips.StageClock(task.name.rsplit(".", 1)[-1])


def _on_task_end(task_id: str | None = None, **_: Any) -> None:
    clock = _clocks.pop(task_id or "", None)
    if clock is not None:
        clock.stop()
        roundtrips.flush_soon(_redis())


if roundtrips.key() is not None:
    from pagemill.db.session import get_engine

    roundtrips.install(get_engine())
    task_prerun.connect(_on_task_start, weak=False)
    task_postrun.connect(_on_task_end, weak=False)

__all__ = ["app"]
