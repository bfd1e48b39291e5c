"""Pooled connections are pinged only after they sat idle (pagemill.db.session), on a
real Postgres: a recently used one goes straight to its statement, and one whose
server process was killed while it sat idle is replaced, with the pool's others."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import DBAPIError

from pagemill.db.session import ping_when_idle

IDLE_S = 0.3


@pytest.fixture
def pings() -> list[int]:
    return []


@pytest.fixture
def engine(database_url: str, pings: list[int]) -> Iterator[Engine]:
    engine = create_engine(database_url, pool_size=2)
    ping_when_idle(engine, IDLE_S)
    ping = engine.dialect.do_ping

    def counted_ping(dbapi_connection: Any) -> bool:
        pings.append(1)
        return bool(ping(dbapi_connection))

    engine.dialect.do_ping = counted_ping  # type: ignore[method-assign]
    yield engine
    engine.dispose()


def _backend_pid(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(text("SELECT pg_backend_pid()")).scalar_one())


def _kill(database_url: str, pid: int) -> None:
    with psycopg.connect(database_url.replace("+psycopg", ""), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


def test_a_connection_used_just_now_is_not_pinged(engine: Engine, pings: list[int]) -> None:
    first = _backend_pid(engine)
    for _ in range(5):
        assert _backend_pid(engine) == first
    assert pings == []


def test_an_idle_connection_is_pinged_and_a_dead_one_replaced(
    engine: Engine, database_url: str, pings: list[int]
) -> None:
    killed = _backend_pid(engine)
    _kill(database_url, killed)
    time.sleep(IDLE_S * 2)

    replacement = _backend_pid(engine)

    assert replacement != killed
    assert pings == [1]


def test_a_connection_killed_within_the_idle_time_fails_once_then_the_pool_recovers(
    engine: Engine, database_url: str
) -> None:
    killed = _backend_pid(engine)
    _kill(database_url, killed)

    with pytest.raises(DBAPIError) as failed:
        _backend_pid(engine)
    assert failed.value.connection_invalidated
    assert _backend_pid(engine) != killed
