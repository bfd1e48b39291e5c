"""Statements run on the driver's connection (pagemill.db.direct), on a real Postgres:
they bind and read as SQLAlchemy would, each commits on its own, the connection goes
back to the pool as it came, and the driver's errors come out as SQLAlchemy's."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, Interval, Uuid, bindparam, create_engine, func, select, update
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError

from pagemill.clients.repository import authenticate
from pagemill.db.direct import AutocommitDriver
from pagemill.db.models import Page
from pagemill.db.session import session_scope
from pagemill.domain import TERMINAL_PAGE_STATUSES, JobStatus, LicenseUse, PageStatus
from tests.conftest import TEST_ENV, make_client_key
from tests.support.factories import add_job

FACTS = {"number": 1, "words": ["Total", "1,939.00"], "nested": {"ok": True}}


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    # One connection, so each test sees what a statement left on it.
    engine = create_engine(database_url, pool_size=1, max_overflow=0)
    yield engine
    engine.dispose()


@pytest.fixture
def job_id(db: str) -> uuid.UUID:
    with session_scope() as session:
        client = authenticate(session, make_client_key())
        assert client is not None
        pages: list[dict[str, Any]] = [
            {"status": PageStatus.queued, "facts": FACTS, "license_use": LicenseUse.commercial},
            {"status": PageStatus.succeeded, "cost_usd": Decimal("0.00123456")},
        ]
        return add_job(session, client.id, pages, status=JobStatus.running).id


# Enums by value in and out, JSON in and out, an interval, a numeric, a UUID and an IN
# list written in the statement: what the OCR path's statements bind and read.
UPDATE_FIRST_PAGE = (
    update(Page)
    .where(
        Page.job_id == bindparam("of_job", type_=Uuid()),
        Page.number == 1,
        Page.status.in_([PageStatus.queued, PageStatus.running]),
    )
    .values(
        status=bindparam("new_status"),
        engine_details=bindparam("details"),
        lease_expires_at=func.now() + bindparam("lease", type_=Interval()),
    )
    .returning(Page.status, Page.license_use, Page.facts, Page.engine_details, Page.job_id)
)
READ_PAGES = select(
    func.count(), func.sum(Page.cost_usd), func.bool_and(Page.status.in_(TERMINAL_PAGE_STATUSES))
).where(Page.job_id == bindparam("job_id", type_=Uuid()))


def details_stored(job_id: uuid.UUID) -> tuple[Any, ...] | None:
    """Whether the first page's engine_details are SQL NULL, and whether JSON null."""
    url = TEST_ENV["PAGEMILL_DATABASE_URL"].replace("+psycopg", "")
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT engine_details IS NULL, engine_details = 'null'::jsonb FROM pages"
            " WHERE job_id = %s AND number = 1",
            (job_id,),
        ).fetchone()


def _through_sqlalchemy(engine: Engine, statement: Any, params: dict[str, Any]) -> Any:
    with engine.begin() as connection:
        row = connection.execute(statement, params).one_or_none()
        connection.rollback()
        return None if row is None else tuple(row)


def test_values_bind_and_read_as_through_sqlalchemy(engine: Engine, job_id: uuid.UUID) -> None:
    params = {
        "of_job": job_id,
        "new_status": PageStatus.running,
        "details": {"model": "m", "tokens": [1, 2]},
        "lease": timedelta(seconds=90),
    }
    expected = _through_sqlalchemy(engine, UPDATE_FIRST_PAGE, params)

    row = AutocommitDriver(engine).one_or_none(UPDATE_FIRST_PAGE, params)

    assert row == expected
    assert row is not None and expected is not None
    assert [type(value) for value in row] == [type(value) for value in expected]
    assert row[:2] == (PageStatus.running, LicenseUse.commercial)
    assert row[2] == FACTS and row[3] == {"model": "m", "tokens": [1, 2]}
    # None into a JSON column is JSON null, not SQL NULL, as SQLAlchemy binds it.
    nothing = {**params, "details": None}
    assert AutocommitDriver(engine).one_or_none(UPDATE_FIRST_PAGE, nothing) == (
        _through_sqlalchemy(engine, UPDATE_FIRST_PAGE, nothing)
    )
    assert details_stored(job_id) == (False, True)
    read = AutocommitDriver(engine).one_or_none(READ_PAGES, {"job_id": job_id})
    assert read == _through_sqlalchemy(engine, READ_PAGES, {"job_id": job_id})
    assert read == (2, Decimal("0.00123456"), False)


def test_each_statement_commits_and_the_connection_returns_as_it_came(
    engine: Engine, job_id: uuid.UUID, database_url: str
) -> None:
    params = {"of_job": job_id, "new_status": PageStatus.running, "details": {}, "lease": None}
    assert AutocommitDriver(engine).one_or_none(UPDATE_FIRST_PAGE, params) is not None
    with psycopg.connect(database_url.replace("+psycopg", "")) as other:
        status = other.execute(
            "SELECT status::text FROM pages WHERE job_id = %s AND number = 1", (job_id,)
        ).fetchone()
    assert status == ("running",)

    # The pool's one connection, next used in a transaction: it must be one again.
    with engine.connect() as connection:
        assert connection.connection.driver_connection.autocommit is False  # type: ignore[union-attr]
        connection.execute(update(Page).where(Page.job_id == job_id).values(engine="x"))
        connection.rollback()
    engines = AutocommitDriver(engine).one_or_none(
        select(func.count()).where(
            Page.job_id == bindparam("job_id", type_=Uuid()), Page.engine == "x"
        ),
        {"job_id": job_id},
    )
    assert engines == (0,)


def test_no_row_is_none_and_a_missing_value_is_refused(engine: Engine, job_id: uuid.UUID) -> None:
    params = {
        "of_job": uuid.uuid4(),
        "new_status": PageStatus.running,
        "details": {},
        "lease": None,
    }
    assert AutocommitDriver(engine).one_or_none(UPDATE_FIRST_PAGE, params) is None
    with pytest.raises(ArgumentError, match="lease"):
        AutocommitDriver(engine).one_or_none(
            UPDATE_FIRST_PAGE, {"of_job": job_id, "new_status": PageStatus.running, "details": {}}
        )


def test_a_driver_error_is_sqlalchemys_and_leaves_the_connection_usable(
    engine: Engine, job_id: uuid.UUID
) -> None:
    duplicate_number = (
        update(Page)
        .where(Page.job_id == bindparam("job_id", type_=Uuid()), Page.number == 2)
        .values(number=1)
        .returning(Page.id)
    )

    with pytest.raises(IntegrityError):
        AutocommitDriver(engine).one_or_none(duplicate_number, {"job_id": job_id})

    assert AutocommitDriver(engine).one_or_none(READ_PAGES, {"job_id": job_id}) is not None


def test_a_killed_connection_fails_once_as_an_outage_then_the_pool_recovers(
    database_url: str, job_id: uuid.UUID
) -> None:
    # A restart kills every pooled connection: the first statement to find one dead lets
    # the others go too, so only it fails.
    engine = create_engine(database_url, pool_size=2, max_overflow=0)
    try:
        held = [engine.raw_connection() for _ in range(2)]
        killed = [connection.driver_connection.info.backend_pid for connection in held]  # type: ignore[union-attr]
        for connection in held:
            connection.close()
        with psycopg.connect(database_url.replace("+psycopg", ""), autocommit=True) as admin:
            for pid in killed:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

        with pytest.raises(DBAPIError) as failed:
            AutocommitDriver(engine).one_or_none(READ_PAGES, {"job_id": job_id})
        assert failed.value.connection_invalidated

        backend = select(func.pg_backend_pid())
        [replacement] = AutocommitDriver(engine).one_or_none(backend, {}) or ()
        assert replacement not in killed
    finally:
        engine.dispose()
