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

# Asked of the server for each connection: a client host that stops answering (its
# network gone, its machine frozen) is dropped within about 15 s, and with it whatever
# its open transaction held. Left to the kernel's defaults, the server would wait two
# hours or more: a host cut off mid-pass of the reaper held the reaper's lock, and so
# stopped the reaper of every host, that long (tests/multihost).
DEAD_CLIENT_OPTIONS = (
    "-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=3 "
    "-c tcp_user_timeout=15000"
)


@lru_cache(maxsize=1)
def get_engine() -> Engine:
    # pool_pre_ping: a Postgres restart must not leave workers holding dead connections.
    return create_engine(
        get_settings().database_url,
        pool_pre_ping=True,
        pool_size=10,
        connect_args={"options": DEAD_CLIENT_OPTIONS},
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
