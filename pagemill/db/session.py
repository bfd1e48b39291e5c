"""The process's engine and its sessions.

One engine per process, never shared across a fork: a forked child gets a fresh
pool (the parent's connections are left to the parent, see pagemill.forks).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from sqlalchemy import Engine, create_engine, event, exc
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


# A pooled connection idle longer than this is pinged before use: a Postgres restart or
# failover, an idle timeout or a NAT must not hand out a dead one. One used more recently
# is not: a ping each time was a third of a page's round trips on the OCR path, and a
# connection that died within the last second fails its statement instead, which
# invalidates the whole pool (as a failed ping would) and is retried as any outage is.
PING_AFTER_IDLE_S = 1.0
_CHECKED_IN_AT = "pagemill_checked_in_at"


@lru_cache(maxsize=1)
def get_engine() -> Engine:
    settings = get_settings()
    seconds = settings.database_dead_client_s
    connect_args = {"application_name": settings.database_application_name}
    if seconds:
        connect_args["options"] = dead_client_options(seconds)
    engine = create_engine(settings.database_url, pool_size=10, connect_args=connect_args)
    ping_when_idle(engine, PING_AFTER_IDLE_S)
    return engine


def ping_when_idle(engine: Engine, idle_s: float) -> None:
    """Ping a pooled connection at checkout when it has been idle over `idle_s`; a dead
    one is replaced, and the connections pooled before it are let go (they were most
    likely cut by the same restart). Listeners on the engine: they outlive a fork's new
    pool."""
    dialect = engine.dialect

    def checked_in(dbapi_connection: Any, record: Any) -> None:
        record.info[_CHECKED_IN_AT] = time.monotonic()

    def checked_out(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        # A new connection has no time recorded: it was opened just now.
        checked_in_at = record.info.get(_CHECKED_IN_AT)
        if checked_in_at is None or time.monotonic() - checked_in_at <= idle_s:
            return
        try:
            alive = dialect.do_ping(dbapi_connection)
        except Exception as error:
            raise exc.InvalidatePoolError(f"the connection failed its ping: {error}") from error
        if not alive:
            raise exc.InvalidatePoolError("the connection failed its ping")

    event.listen(engine, "checkin", checked_in)
    event.listen(engine, "checkout", checked_out)


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
