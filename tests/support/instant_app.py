"""The production worker with an instant text-layer engine, for tests that measure the
service around the engines: `celery -A tests.support.instant_app worker ...`.

The real Celery app, tasks, stages, database and S3; the engine that reads a page's
text layer is replaced by one that answers at once with a fixed page and a fixed
device time, so that every page's cost is known in advance. Prepare's rendering runs
the real renderer's code, in the worker process rather than a sandboxed child: the
sandbox has tests of its own (tests/pagemill/test_sandbox.py), and a thousand forks
would measure the machine, not the service. Production code never imports this module, and
tests only name it to a worker they start: importing it replaces the engine in the
importing process (the figures are in tests/support/instant_engine.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pagemill.engines.catalog import TEXT_LAYER_ENGINE
from tests.support.instant_engine import InstantTextLayerEngine
from worker import render_child
from worker.celery_app import app
from worker.engines import registry
from worker.stages import prepare


def _render_in_process(
    module: str, args: list[str], limits: Any, idle: Any = None
) -> Iterator[dict[str, Any]]:
    if module != "worker.render_child":
        yield from _real_run_sandboxed(module, args, limits, idle)
        return
    lines: list[str] = []
    render_child.emit = lambda line: lines.append(json.dumps(line))  # type: ignore[assignment]
    render_child.run(args)
    for line in lines:  # as the parent reads them from a child: JSON, line by line
        yield json.loads(line)


# Set in the parent before the pool forks, so every child inherits it.
registry._engines[TEXT_LAYER_ENGINE] = InstantTextLayerEngine()
_real_run_sandboxed = prepare.run_sandboxed
prepare.run_sandboxed = _render_in_process  # type: ignore[assignment]
__all__ = ["app"]
