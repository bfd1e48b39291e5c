"""Any forked process, not only a Celery pool child, talks to Postgres and S3 on
connections of its own: the parent's stay the parent's."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from sqlalchemy import text

from pagemill.db.session import get_engine, session_factory
from pagemill.storage import ObjectStore


def backend_pid() -> int:
    with session_factory()() as session:
        return int(session.execute(text("SELECT pg_backend_pid()")).scalar_one())


def in_child(work: Callable[[], str]) -> str:
    """Run `work` in a forked child; its result as text."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            os.write(write_end, work().encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        result = pipe.read()
    os.waitpid(pid, 0)
    return result


def test_a_forked_child_gets_its_own_database_connection(db: str) -> None:
    # One pooled connection only: with several left by earlier tests, the pool hands
    # them out in turn and the next checkout would be another one anyway.
    get_engine().dispose()
    parent = backend_pid()  # the pool now holds this connection, idle
    child = int(in_child(lambda: str(backend_pid())))
    assert child != parent
    assert backend_pid() == parent, "the parent's connection must survive the child"


def test_a_forked_child_gets_its_own_object_store_client(s3: ObjectStore) -> None:
    s3.put_bytes("fork-check", b"parent", "text/plain")
    parent_client: Any = s3._client

    def child() -> str:
        assert s3._client is not parent_client
        return s3.get_bytes("fork-check").decode()

    assert in_child(child) == "parent"
    assert s3._client is parent_client
    assert s3.get_bytes("fork-check") == b"parent"
