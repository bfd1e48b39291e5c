"""The production API with its Postgres round trips counted, for the orchestration
benchmark: `uvicorn bench.counted_api:app`. Requires PAGEMILL_BENCH_ROUNDTRIPS_KEY
(bench/roundtrips.py); production never imports it. Its CPU is the API process's,
measured from outside (bench/stack.py).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from api.app import app as api_app
from bench import roundtrips
from pagemill.db.session import get_engine

# The benchmark sends the API nothing but submissions: the whole process is one stage.
roundtrips.set_default_stage("api")
roundtrips.install(get_engine())


@lru_cache(maxsize=1)
def _redis() -> Any:
    import redis

    from pagemill.settings import get_settings

    return redis.Redis.from_url(get_settings().broker_url)


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await api_app(scope, receive, send)
    if scope["type"] == "http" and scope.get("method") == "POST":
        roundtrips.count_run("api")
        roundtrips.flush_soon(_redis())
