"""The reference for the orchestration benchmark: plain Celery tasks that do
nothing but count themselves, with the service's own Celery configuration
(acks late, prefetch 1, JSON) on the same Redis.

`celery -A bench.noop_app worker --queues <prefix>noop ...`
"""

from __future__ import annotations

import os

import redis

from pagemill.queue import make_celery
from pagemill.settings import get_settings

NOOP_TASK = "pagemill_bench.noop"
COUNTER = os.environ.get("PAGEMILL_BENCH_NOOP_COUNTER", "pagemill-bench-noop")

settings = get_settings()
app = make_celery(settings)
app.conf.task_routes = {NOOP_TASK: {"queue": settings.queue("noop")}}
_counter = redis.Redis.from_url(settings.broker_url)


@app.task(name=NOOP_TASK)
def noop(number: int) -> None:
    _counter.incr(COUNTER)
