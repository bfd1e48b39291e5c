"""Postgres round trips and CPU by stage, counted inside the benchmark's own processes.

Installed only by the benchmark's worker app (bench/instant_app.py) and API
(bench/counted_api.py), and only when PAGEMILL_BENCH_ROUNDTRIPS_KEY names the Redis
hash the counts go to; production code never imports this module.

A round trip is one request the process waits on Postgres for. With psycopg 3 that is
each statement, plus the BEGIN it sends before the first statement of a transaction,
plus the COMMIT or ROLLBACK of a transaction that sent anything, plus each pool
ping. An executemany is counted once (psycopg pipelines it). Each transaction is
labelled with the first caller outside the SQL modules (`ocr._claim`,
`purge.discard_if_purged`, ...), so the counts say which step paid for what.

Counts and CPU are kept in the process and added to the hash every FLUSH_PERIOD_S by a
thread of the process: fields `rt|<stage>|<label>`, `cpu_us|<stage>`, `runs|<stage>`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event

from pagemill.db.direct import AutocommitDriver

KEY_ENV = "PAGEMILL_BENCH_ROUNDTRIPS_KEY"
ROOT = Path(__file__).resolve().parent.parent
# Frames skipped when naming who opened a transaction: the SQL itself, not its caller.
_PLUMBING = (
    str(ROOT / "pagemill" / "db"),
    str(ROOT / "pagemill" / "jobs" / "repository.py"),
    str(ROOT / "pagemill" / "workers" / "registry.py"),
    str(ROOT / "bench"),
)
_OWN = (str(ROOT / "pagemill"), str(ROOT / "worker"), str(ROOT / "api"))

_counts: Counter[str] = Counter()
_lock = threading.Lock()
_stage = threading.local()
_default_stage = ["outside"]  # for threads no stage was set in (the API's thread pool)
_labels: dict[int, str] = {}  # DBAPI connection id -> label of its open transaction


def key() -> str | None:
    return os.environ.get(KEY_ENV) or None


def install(engine: Engine) -> None:
    """Count this engine's round trips from now on (the listeners survive a fork's
    pool disposal: they belong to the engine, not to its connections)."""
    event.listen(engine, "before_cursor_execute", _before_execute)
    event.listen(engine, "commit", _ending)
    event.listen(engine, "rollback", _ending)
    event.listen(engine.pool, "reset", _reset)
    event.listen(engine.pool, "connect", _connect)
    dialect = engine.dialect
    ping = dialect.do_ping

    def counted_ping(dbapi_connection: Any) -> bool:
        _add("ping", _caller())
        return bool(ping(dbapi_connection))

    dialect.do_ping = counted_ping  # type: ignore[method-assign]
    _count_direct_statements()


def _count_direct_statements() -> None:
    """Statements run on the driver's connection (pagemill.db.direct) pass no engine
    event: each is one round trip, committing on its own."""
    fetch = AutocommitDriver._fetch_one
    if getattr(fetch, "counted", False):
        return

    def counted_fetch(self: AutocommitDriver, statement: Any, values: dict[str, Any]) -> Any:
        _add("statement", _caller())
        return fetch(self, statement, values)

    counted_fetch.counted = True  # type: ignore[attr-defined]
    AutocommitDriver._fetch_one = counted_fetch  # type: ignore[method-assign,assignment]


def set_stage(stage: str | None) -> None:
    _stage.name = stage


def set_default_stage(stage: str) -> None:
    _default_stage[0] = stage


def count_run(stage: str) -> None:
    with _lock:
        _counts[f"runs|{stage}"] += 1


def stage() -> str:
    return getattr(_stage, "name", None) or _default_stage[0]


def _add(kind: str, label: str) -> None:
    with _lock:
        _counts[f"rt|{stage()}|{label}"] += 1


def _caller() -> str:
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(_OWN) and not name.startswith(_PLUMBING):
            return f"{Path(name).stem}.{frame.f_code.co_name}"
        frame = frame.f_back  # type: ignore[assignment]
    return "other"


def _in_transaction(dbapi_connection: Any) -> bool:
    import psycopg

    status = dbapi_connection.info.transaction_status
    return bool(status != psycopg.pq.TransactionStatus.IDLE)


def _before_execute(
    conn: Any, cursor: Any, statement: str, params: Any, context: Any, executemany: bool
) -> None:
    dbapi_connection = cursor.connection
    ident = id(dbapi_connection)
    if not dbapi_connection.autocommit and not _in_transaction(dbapi_connection):
        _labels[ident] = _caller()
        _add("begin", _labels[ident])
    label = _labels.get(ident) if not dbapi_connection.autocommit else None
    _add("statement", label or _caller())


def _ending(conn: Any) -> None:
    dbapi_connection = conn.connection.dbapi_connection
    if dbapi_connection is not None and _in_transaction(dbapi_connection):
        _add("end", _labels.pop(id(dbapi_connection), "other"))


def _reset(dbapi_connection: Any, record: Any, reset_state: Any = None) -> None:
    if _in_transaction(dbapi_connection):
        _add("end", _labels.pop(id(dbapi_connection), "other"))


def _connect(dbapi_connection: Any, record: Any) -> None:
    with _lock:
        _counts[f"rt|{stage()}|connect"] += 1


class StageClock:
    """CPU of this process while it ran one task or request (the render child's is not
    counted: it is another process)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.started = time.process_time()
        set_stage(name)

    def stop(self) -> None:
        spent_us = int((time.process_time() - self.started) * 1e6)
        with _lock:
            _counts[f"cpu_us|{self.name}"] += spent_us
            _counts[f"runs|{self.name}"] += 1
        set_stage(None)


# How often a process adds its counts to the hash: a write takes 0.2 ms of CPU, which
# written after every task would be counted in the CPU the benchmark measures.
FLUSH_PERIOD_S = 0.25
_flusher_pid = 0


def flush_soon(client: Any) -> None:
    """Have this process's counts added to the hash within FLUSH_PERIOD_S, by a thread
    of its own (started in each process on first use: a forked child has none)."""
    global _flusher_pid
    if _flusher_pid == os.getpid():
        return
    _flusher_pid = os.getpid()
    threading.Thread(target=_flush_forever, args=(client,), daemon=True).start()


def _flush_forever(client: Any) -> None:
    while True:
        time.sleep(FLUSH_PERIOD_S)
        flush(client)


def flush(client: Any) -> None:
    """Add what this process counted to the hash and start again from zero."""
    target = key()
    with _lock:
        counted = dict(_counts)
        _counts.clear()
    if not counted or target is None:
        return
    pipe = client.pipeline(transaction=False)
    for field, value in counted.items():
        pipe.hincrby(target, field, value)
    pipe.execute()


def read(client: Any) -> dict[str, int]:
    target = key()
    if target is None:
        return {}
    raw = client.hgetall(target)
    return {k.decode(): int(v) for k, v in raw.items()}


def reset(client: Any) -> None:
    target = key()
    if target is not None:
        client.delete(target)


def launch_counted_api(env: dict[str, str], log_path: Path, port: int) -> subprocess.Popen[bytes]:
    """The real API with its round trips counted (bench/counted_api.py), not yet
    answering: wait with tests.support.services.wait_for_api. `env` names the hash."""
    if not env.get(KEY_ENV):
        raise ValueError(f"{KEY_ENV} must name the Redis hash the counts go to")
    command = [sys.executable, "-m", "uvicorn", "bench.counted_api:app"]
    return subprocess.Popen(
        [*command, "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log_path.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
