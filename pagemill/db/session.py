"""The process's engine and its sessions.

One engine per process, never shared across a fork: a forked child gets a fresh
pool (the parent's connections are left to the parent, see pagemill.forks).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import Session, sessionmaker

from pagemill.settings import get_settings


def dead_client_options(seconds: int) -> str:
    """Asked of the server for each connection: a client host that stops answering (its
    network gone, its machine frozen) is dropped after about `seconds`, and with it
    whatever its open transaction held. Left to the kernel's defaults, the server waits
    two hours or more: a host cut off mid-pass of the reaper held the reaper's lock,
    and so stopped the reaper of every host, that long (tests/multihost)."""
    idle_s, interval_s = max(1, seconds // 3), max(1, seconds // 6)
    return (
        f"-c tcp_keepalives_idle={idle_s} -c tcp_keepalives_interval={interval_s} "
        f"-c tcp_keepalives_count=4 -c tcp_user_timeout={seconds * 1000}"
    )


@lru_cache(maxsize=1)
def get_engine() -> Engine:
    settings = get_settings()
    seconds = settings.database_dead_client_s
    connect_args = {"options": dead_client_options(seconds)} if seconds else {}
    # pool_pre_ping: a Postgres restart must not leave workers holding dead connections.
    return create_engine(
        settings.database_url, pool_pre_ping=True, pool_size=10, connect_args=connect_args
    )


def session_factory() -> sessionmaker[Session]:
    return sessionmaker(get_engine(), expire_on_commit=False)


@contextmanager
def session_scope() -> Iterator[Session]:
    """A session that commits on success and rolls back on any error."""
    session = session_factory()()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def _new_pool_in_child() -> None:
    # close=False: the connections are the parent's; closing them here would end the
    # parent's sessions. The engine object stays, so sessionmakers made before the
    # fork keep working, on the child's own connections.
    if get_engine.cache_info().currsize:
        get_engine().dispose(close=False)


os.register_at_fork(after_in_child=_new_pool_in_child)
