"""Every SQL statement about jobs and pages. Writes that finish work are conditional,
so a duplicate message or a worker that outlived its lease changes nothing.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    Float,
    Integer,
    Interval,
    String,
    Uuid,
    bindparam,
    case,
    cast,
    delete,
    func,
    literal_column,
    select,
    text,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.orm import Session, sessionmaker, undefer

from pagemill.db.direct import AutocommitDriver
from pagemill.db.models import Batch, Client, IdempotencyKey, Job, Page, Worker
from pagemill.domain import (
    TERMINAL_JOB_STATUSES,
    TERMINAL_PAGE_STATUSES,
    JobStatus,
    LicenseUse,
    PageStatus,
    QueuedPage,
    SourceKind,
)

# What the per-page statements of the OCR path run on: a session (in its transaction),
# or the driver's connection, each statement committing on its own (`autocommit_driver`).
Executor = Session | AutocommitDriver


def autocommit_driver(sessions: sessionmaker[Session]) -> AutocommitDriver:
    """For the per-page statements run as plain SQL (`_run_built`), which need nothing
    of a session: each commits on its own, on the driver's connection (pagemill.db.direct).
    A page's claim and result cost 0.36 ms of CPU this way against 0.58 to 0.83 on a
    SQLAlchemy Connection (measured in one process, 1,000 pairs)."""
    return AutocommitDriver(sessions.kw["bind"])


@contextmanager
def autocommit(sessions: sessionmaker[Session]) -> Iterator[Session]:
    """A session whose statements each commit on their own, for work that is a single
    statement: its atomicity is the statement's, and it saves the BEGIN and the COMMIT,
    two of the three round trips such a transaction costs."""
    with sessions() as session:
        session.connection(execution_options={"isolation_level": "AUTOCOMMIT"})
        yield session


def get_job(session: Session, job_id: uuid.UUID) -> Job | None:
    return session.get(Job, job_id)


def reload_job(session: Session, job_id: uuid.UUID) -> Job | None:
    """The job as this transaction sees it now, not as an earlier read left it."""
    return session.get(Job, job_id, populate_existing=True)


def get_client_job(session: Session, client_id: uuid.UUID, job_id: uuid.UUID) -> Job | None:
    return session.scalar(select(Job).where(Job.id == job_id, Job.client_id == client_id))


def list_client_jobs(
    session: Session,
    client_id: uuid.UUID | None,
    status: JobStatus | None,
    limit: int,
    offset: int,
) -> list[Job]:
    return search_jobs(session, JobSearch(client_id=client_id, status=status), limit, offset)


@dataclass(frozen=True)
class JobSearch:
    """What a job listing is narrowed to; None leaves a filter out."""

    client_id: uuid.UUID | None = None
    status: JobStatus | None = None
    engine: str | None = None  # the engine asked for, or one that ran a page
    license_use: LicenseUse | None = None
    created_from: datetime | None = None
    created_before: datetime | None = None
    # A job id (or its first characters), part of a file name, or a metadata value.
    text: str | None = None


def search_jobs(session: Session, search: JobSearch, limit: int, offset: int) -> list[Job]:
    """Jobs newest first, narrowed by `search`."""
    query = select(Job).order_by(Job.created_at.desc(), Job.id).limit(limit).offset(offset)
    if search.client_id is not None:
        query = query.where(Job.client_id == search.client_id)
    if search.status is not None:
        query = query.where(Job.status == search.status)
    if search.engine:
        ran_it = select(Page.id).where(Page.job_id == Job.id, Page.engine == search.engine)
        query = query.where((Job.engine == search.engine) | ran_it.exists())
    if search.license_use is not None:
        query = query.where(Job.license_use == search.license_use)
    if search.created_from is not None:
        query = query.where(Job.created_at >= search.created_from)
    if search.created_before is not None:
        query = query.where(Job.created_at < search.created_before)
    if search.text:
        query = query.where(_matches_text(search.text.strip()))
    return list(session.scalars(query))


def _matches_text(needle: str) -> Any:
    escaped = needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    # Any string value at any depth of the caller's metadata equal to the needle.
    in_metadata = func.jsonb_path_exists(
        Job.caller_metadata,
        literal_column("'$.** ? (@ == $needle)'::jsonpath"),
        func.jsonb_build_object("needle", needle),
    )
    return (
        cast(Job.id, String).startswith(needle.lower(), autoescape=True)
        | Job.source_filename.ilike(f"%{escaped}%")
        | in_metadata
    )


def list_pages(
    session: Session, job_id: uuid.UUID, with_staged_markdown: bool = False
) -> list[Page]:
    query = select(Page).where(Page.job_id == job_id).order_by(Page.number)
    if with_staged_markdown:
        query = query.options(undefer(Page.staged_markdown))
    return list(session.scalars(query))


def get_page(session: Session, page_id: int) -> Page | None:
    return session.get(Page, page_id)


def get_page_by_number(session: Session, job_id: uuid.UUID, number: int) -> Page | None:
    return session.scalar(select(Page).where(Page.job_id == job_id, Page.number == number))


def claim_prepare(session: Session, job_id: uuid.UUID, lease: timedelta) -> Job | None:
    """Take a job's prepare stage for one attempt, or None when it is not ours: the
    job ended, its pages are all recorded, or another attempt holds a live lease."""
    claimed = session.scalars(
        update(Job)
        .where(
            Job.id == job_id,
            (Job.status == JobStatus.queued)
            | ((Job.status == JobStatus.running) & (Job.prepare_lease_expires_at < func.now())),
        )
        .values(
            status=JobStatus.running,
            started_at=func.coalesce(Job.started_at, func.now()),
            prepare_attempts=Job.prepare_attempts + 1,
            prepare_lease_expires_at=func.now() + lease,
        )
        .returning(Job)
        .execution_options(populate_existing=True)
    ).one_or_none()
    return claimed


def finish_prepare(session: Session, job_id: uuid.UUID, attempt: int) -> bool:
    """Release the prepare lease: every page is recorded. Fenced by the attempt."""
    result = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.prepare_attempts == attempt)
        .values(prepare_lease_expires_at=None)
        .returning(Job.id)
    )
    return result.one_or_none() is not None


def job_is_running(session: Session, job_id: uuid.UUID) -> bool:
    status = session.scalar(select(Job.status).where(Job.id == job_id))
    return status is JobStatus.running


def insert_page(session: Session, values: dict[str, Any]) -> None:
    """Record a prepared page; a second prepare of the same page changes nothing, and
    neither does one for a job that has ended meanwhile (it would stay queued forever)."""
    # FOR SHARE waits for a transaction ending the job, so the check and complete_job's
    # closing of the job's pages cannot interleave.
    live = session.scalar(
        select(Job.status).where(Job.id == values["job_id"]).with_for_update(read=True)
    )
    if live is None or live.is_terminal:
        return
    session.execute(
        insert(Page).values(**values).on_conflict_do_nothing(index_elements=["job_id", "number"])
    )


@dataclass(frozen=True)
class PagesRecorded:
    """What recording a batch of prepared pages found."""

    job_running: bool  # False: the job ended (or was never started); nothing recorded
    purge_started: bool
    # The id of each page this batch recorded, by number; a page an earlier attempt
    # recorded is not among them.
    page_ids: dict[int, int]


def record_pages(
    session: Session, job_id: uuid.UUID, rows: Sequence[dict[str, Any]]
) -> PagesRecorded:
    """insert_page for a batch of the job's pages (each row the same columns, job_id
    left out), with the job's state and purge fence read in the same statement.

    The job row is locked FOR SHARE by the statement, as insert_page locks it: a
    transaction ending the job waits for it, or it sees the job ended and inserts
    nothing, so complete_job's closing of the job's pages cannot miss these."""
    columns = tuple(rows[0])
    params: dict[str, Any] = {"job_id": job_id}
    for index, row in enumerate(rows):
        params.update({f"v{index}_{name}": value for name, value in row.items()})
    found = _run_built(session, _record_pages_statement(columns, len(rows)), params)
    if found is None:
        return PagesRecorded(job_running=False, purge_started=False, page_ids={})
    return PagesRecorded(
        job_running=found[0] is JobStatus.running,
        purge_started=bool(found[1]),
        page_ids={int(number): int(page_id) for number, page_id in found[2] or ()},
    )


@functools.cache
def _record_pages_statement(columns: tuple[str, ...], count: int) -> Any:
    """record_pages' statement for `count` rows of these columns, built once (see
    `_take_page_statement`); row i's values are bound as `v<i>_<column>`. Each value is
    cast to its column's type: the rows are a UNION, which would otherwise read them
    as text."""
    table = Page.__table__
    job = (
        select(Job.id, Job.status, Job.purged_at)
        .where(Job.id == bindparam("job_id", type_=table.c["job_id"].type))
        .with_for_update(read=True)
        .cte("job")
    )

    def row(index: int) -> Any:
        return select(
            *[
                cast(
                    bindparam(f"v{index}_{name}", type_=table.c[name].type), table.c[name].type
                ).label(name)
                for name in columns
            ]
        )

    rows: Any = row(0) if count == 1 else union_all(*[row(i) for i in range(count)])
    given = rows.subquery("v")
    inserted = (
        insert(Page)
        .from_select(
            ["job_id", *columns],
            select(job.c.id, *[given.c[name] for name in columns]).select_from(
                given.join(job, job.c.status == JobStatus.running)
            ),
        )
        .on_conflict_do_nothing(index_elements=["job_id", "number"])
        .returning(Page.number, Page.id)
        .cte("inserted")
    )
    recorded = select(
        func.json_agg(func.json_build_array(inserted.c.number, inserted.c.id))
    ).scalar_subquery()
    return select(job.c.status, job.c.purged_at.is_not(None), recorded)


def page_numbers(session: Session, job_id: uuid.UUID) -> set[int]:
    """Numbers of the job's pages recorded so far."""
    return set(session.scalars(select(Page.number).where(Page.job_id == job_id)))


def queued_pages(session: Session, job_id: uuid.UUID) -> list[QueuedPage]:
    """Each queued page with what routing needs."""
    rows = session.execute(
        select(Page.id, Page.engine, Page.license_use)
        .where(Page.job_id == job_id, Page.status == PageStatus.queued)
        .order_by(Page.number)
    )
    return [QueuedPage(row[0], row[1] or "", row[2]) for row in rows]


@dataclass(frozen=True)
class PageClaim:
    page_id: int
    job_id: uuid.UUID
    number: int
    attempt: int


def claim_page(
    session: Executor, page_id: int, lease: timedelta, worker_id: str | None = None
) -> PageClaim | None:
    """Take a page for this attempt; None when it is not ours to run (done, cancelled,
    or held by another worker whose lease has not run out). The page names the worker
    holding it, so that worker's late reports about it can be told from another's."""
    row = _run_built(session, _claim_page_statement(), _claim_params(page_id, lease, worker_id))
    if row is None:
        return None
    return PageClaim(page_id=row[0], job_id=row[1], number=row[2], attempt=row[3])


def _claim_statement() -> Any:
    """The claim, its page, lease and worker bound at each call (`_claim_params`)."""
    job_is_live = (
        select(Job.id).where(Job.id == Page.job_id, Job.status == JobStatus.running).exists()
    )
    return (
        update(Page)
        .where(
            Page.id == bindparam("page_id"),
            job_is_live,
            (Page.status == PageStatus.queued)
            | ((Page.status == PageStatus.running) & (Page.lease_expires_at < func.now())),
        )
        .values(
            status=PageStatus.running,
            attempts=Page.attempts + 1,
            started_at=func.now(),
            lease_expires_at=func.now() + bindparam("lease", type_=Interval()),
            worker_id=bindparam("worker_id", type_=String()),
        )
    )


def _claim_params(page_id: int, lease: timedelta, worker_id: str | None) -> dict[str, Any]:
    return {"page_id": page_id, "lease": lease, "worker_id": worker_id}


# The per-page statements of the OCR path are built once, their values bound at each
# call: building a statement and deriving its cache key took most of the CPU of running
# it (SQLAlchemy memoizes the key on the statement object).
def _run_built(session: Executor, statement: Any, params: dict[str, Any]) -> Any:
    """One row (or None) of a per-page statement built once, run as plain SQL on the
    driver's connection or on the session's (and in its transaction): the ORM's handling
    of a statement (autoflush, identity map, entity loading) has nothing to do for these,
    which read and write columns only, and it cost a third of their CPU."""
    if isinstance(session, AutocommitDriver):
        return session.one_or_none(statement, params)
    return session.connection().execute(statement, params).one_or_none()


@functools.cache
def _claim_page_statement() -> Any:
    return _claim_statement().returning(Page.id, Page.job_id, Page.number, Page.attempts)


@functools.cache
def _take_page_statement() -> Any:
    return _claim_statement().returning(
        Page.id,
        Page.job_id,
        Page.number,
        Page.attempts,
        Page.engine,
        Page.facts,
        Page.image_dpi,
        Page.image_width_px,
        Page.engine_failures,
        Page.license_use,
        Page.engine_details,
        Page.device_seconds,
        Page.error,
    )


@dataclass(frozen=True)
class TakenPage:
    """A page claimed for an attempt, with what its OCR attempt reads of the row."""

    claim: PageClaim
    engine: str | None
    facts: dict[str, Any]
    image_dpi: int | None
    image_stored: bool
    engine_failures: int
    license_use: LicenseUse | None
    engine_details: dict[str, Any]
    charged_seconds: float  # charged to earlier attempts
    error: str | None  # the last attempt's


def take_page(
    session: Executor, page_id: int, lease: timedelta, worker_id: str | None = None
) -> TakenPage | None:
    """claim_page, returning the page as the attempt needs it in the same statement."""
    row = _run_built(session, _take_page_statement(), _claim_params(page_id, lease, worker_id))
    if row is None:
        return None
    return TakenPage(
        claim=PageClaim(page_id=row[0], job_id=row[1], number=row[2], attempt=row[3]),
        engine=row[4],
        facts=dict(row[5] or {}),
        image_dpi=row[6],
        image_stored=row[7] is not None,
        engine_failures=row[8],
        license_use=row[9],
        engine_details=dict(row[10] or {}),
        charged_seconds=row[11] or 0.0,
        error=row[12],
    )


def finish_page(session: Session, claim: PageClaim, values: dict[str, Any]) -> bool:
    """Write a page's result, only if the attempt that claimed it still holds it."""
    result = session.execute(
        update(Page)
        .where(
            Page.id == claim.page_id,
            Page.attempts == claim.attempt,
            Page.status == PageStatus.running,
        )
        .values(
            finished_at=func.now(),
            lease_expires_at=None,
            wall_seconds=func.extract("epoch", func.now() - Page.started_at),
            **values,
        )
        .returning(Page.id)
    )
    return result.one_or_none() is not None


def page_result_attempt(session: Session, page_id: int) -> int | None:
    """The attempt whose objects are the page's result (pages.result_attempt)."""
    return session.scalar(select(Page.result_attempt).where(Page.id == page_id))


@dataclass(frozen=True)
class PageFinished:
    """What one attempt's result write found."""

    written: bool  # False: the attempt no longer held the page, and nothing changed
    purge_started: bool  # the job's purge fence is up (it has ended, so nothing was written)
    job_complete: bool  # every selected page of the job has ended, this one included


def finish_page_counted(
    session: Executor,
    claim: PageClaim,
    values: dict[str, Any],
    charge: tuple[str, float] | None = None,
) -> PageFinished:
    """finish_page, the worker's charge for the page (`charge`: worker id and device
    seconds, added only when the result is written) and all_pages_terminal, in one
    statement: one round trip where there were five.

    The counts are read from the statement's snapshot, which does not show this page's
    own change: it was running there (the write is fenced on it), so it is added here.
    In an autocommit session (`autocommit`), the job's last pages are counted again
    after the write commits, so two last pages finishing at once cannot both miss the
    other.
    """
    params: dict[str, Any] = {
        "finish_page_id": claim.page_id,
        "finish_attempt": claim.attempt,
        "finish_job_id": claim.job_id,
        **{f"value_{column}": value for column, value in values.items()},
    }
    if charge is not None:
        params["charge_worker_id"], params["charge_seconds"] = charge
    statement = _finish_counted_statement(tuple(sorted(values)), charge is not None)
    row = _run_built(session, statement, params)
    if row is None:
        return PageFinished(written=False, purge_started=False, job_complete=False)
    was_written, purge_started, total, ended, running = (
        bool(row[0]),
        bool(row[1]),
        row[2],
        row[3],
        row[4],
    )
    ends_now = was_written and PageStatus(values["status"]) in TERMINAL_PAGE_STATUSES
    complete = ends_now and total is not None and ended + 1 >= total
    if ends_now and not complete and total is not None and ended + 1 + running >= total:
        # Every page left is running, so one may be finishing now, unseen by this
        # snapshot as this page is by its: counted again once this write is committed
        # (the session commits each statement), the later of the two sees both.
        complete = all_pages_terminal(session, claim.job_id)
    return PageFinished(written=was_written, purge_started=purge_started, job_complete=complete)


@functools.cache
def _finish_counted_statement(columns: tuple[str, ...], charged: bool) -> Any:
    """finish_page_counted's statement for these value columns, built once (see
    `_take_page_statement`); every value is bound at the call."""
    finished = (
        update(Page)
        .where(
            Page.id == bindparam("finish_page_id"),
            Page.attempts == bindparam("finish_attempt"),
            Page.status == PageStatus.running,
        )
        .values(
            finished_at=func.now(),
            lease_expires_at=None,
            wall_seconds=func.extract("epoch", func.now() - Page.started_at),
            **{column: bindparam(f"value_{column}") for column in columns},
        )
        .returning(Page.id)
        .cte("finished")
    )
    written = select(finished.c.id).exists()
    job_id: Any = bindparam("finish_job_id")
    terminal = (
        select(func.count())
        .select_from(Page)
        .where(Page.job_id == job_id, Page.status.in_(TERMINAL_PAGE_STATUSES))
        .scalar_subquery()
    )
    others_running = (
        select(func.count())
        .select_from(Page)
        .where(
            Page.job_id == job_id,
            Page.status == PageStatus.running,
            Page.id != bindparam("finish_page_id"),
        )
        .scalar_subquery()
    )
    query = select(
        written, Job.purged_at.is_not(None), Job.pages_total, terminal, others_running
    ).where(Job.id == job_id)
    if charged:
        charge = (
            update(Worker)
            .where(Worker.id == bindparam("charge_worker_id"), written)
            .values(
                busy_seconds=Worker.busy_seconds + bindparam("charge_seconds", type_=Float()),
                pages_done=Worker.pages_done + 1,
            )
            .returning(Worker.id)
            .cte("charged")
        )
        query = query.add_cte(charge)
    return query


@dataclass(frozen=True)
class RunningAttempt:
    """A page attempt still running, as its time limit finds it."""

    claim: PageClaim
    elapsed_seconds: float  # since the claim, by the database's clock
    engine_failures: int
    charged_seconds: float  # charged to earlier attempts
    engine_details: dict[str, Any]
    engine: str | None
    license_use: LicenseUse | None


def running_attempt(session: Session, claim: PageClaim) -> RunningAttempt | None:
    """This claim's attempt, if it still holds the page."""
    return _running_attempt(session, (Page.id == claim.page_id) & (Page.attempts == claim.attempt))


def running_attempt_since(
    session: Session, page_id: int, within: timedelta, worker_id: str | None
) -> RunningAttempt | None:
    """The page's running attempt if `worker_id` claimed it within `within`: a report
    from a worker cut off past its lease must not land on the attempt that replaced it."""
    return _running_attempt(
        session,
        (Page.id == page_id)
        & (Page.started_at >= func.now() - within)
        & Page.worker_id.is_not_distinct_from(worker_id),
    )


def _running_attempt(session: Session, which: Any) -> RunningAttempt | None:
    row = session.execute(
        select(
            Page.id,
            Page.job_id,
            Page.number,
            Page.attempts,
            func.extract("epoch", func.now() - Page.started_at),
            Page.engine_failures,
            Page.device_seconds,
            Page.engine_details,
            Page.engine,
            Page.license_use,
        )
        .where(which, Page.status == PageStatus.running)
        .with_for_update()
    ).one_or_none()
    if row is None:
        return None
    return RunningAttempt(
        claim=PageClaim(page_id=row[0], job_id=row[1], number=row[2], attempt=row[3]),
        elapsed_seconds=float(row[4]),
        engine_failures=row[5],
        charged_seconds=row[6] or 0.0,
        engine_details=dict(row[7] or {}),
        engine=row[8],
        license_use=row[9],
    )


def defer_page(session: Session, claim: PageClaim, retry_in_s: float, why: str) -> None:
    """Keep the claim but let it lapse when the retry is due, so that retry (or the
    reaper, if the retry's message is lost) can take the page then and not before."""
    session.execute(
        update(Page)
        .where(
            Page.id == claim.page_id,
            Page.attempts == claim.attempt,
            Page.status == PageStatus.running,
        )
        .values(lease_expires_at=func.now() + timedelta(seconds=retry_in_s), error=why)
    )


def page_status_counts(session: Session, job_id: uuid.UUID) -> dict[PageStatus, int]:
    rows = session.execute(
        select(Page.status, func.count()).where(Page.job_id == job_id).group_by(Page.status)
    )
    return {PageStatus(status): count for status, count in rows}


def all_pages_terminal(session: Executor, job_id: uuid.UUID) -> bool:
    """True once every selected page has ended. Counted against the job's page total,
    not the rows present, because prepare may still be adding pages."""
    row = _run_built(session, _all_pages_terminal_statement(), {"job_id": job_id})
    return row is not None and bool(row[0])


@functools.cache
def _all_pages_terminal_statement() -> Any:
    job_id = bindparam("job_id", type_=Uuid())
    terminal = (
        select(func.count())
        .select_from(Page)
        .where(Page.job_id == job_id, Page.status.in_(TERMINAL_PAGE_STATUSES))
        .scalar_subquery()
    )
    # NULL (no total yet) is not ended.
    return select(Job.pages_total <= terminal).where(Job.id == job_id)


def record_page_furniture(
    session: Session, job_id: uuid.UUID, furniture_by_page: dict[int, list[dict[str, Any]]]
) -> None:
    """Store each page's running headers, footers and page numbers as finalize found
    them, in one statement for every page. Finalize may run twice; both runs write the
    same values."""
    if not furniture_by_page:
        return
    by_number = {str(number): furniture for number, furniture in furniture_by_page.items()}
    found = func.jsonb_each(cast(by_number, JSONB)).table_valued("key", "value").alias("found")
    session.execute(
        update(Page)
        .where(Page.job_id == job_id, Page.number == cast(found.c.key, Integer))
        .values(furniture=found.c.value)
        .execution_options(synchronize_session=False)
    )


def complete_job(
    session: Session,
    job_id: uuid.UUID,
    status: JobStatus,
    error_code: str | None = None,
    error_message: str | None = None,
) -> bool:
    """Make a running job terminal. Exactly one caller wins, however many try.

    Every way a job ends comes through here (by pagemill.jobs.lifecycle.end_job, which
    records its event), so this is where its pages end too: a terminal job has no page
    queued or running. A page still running is taken from
    its worker (whose result write is fenced on `running` and so changes nothing).
    """
    result = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.status.in_([JobStatus.queued, JobStatus.running]))
        .values(
            status=status,
            finished_at=func.now(),
            prepare_lease_expires_at=None,
            error_code=error_code,
            error_message=error_message,
        )
        .returning(Job.id)
    )
    won = result.one_or_none() is not None
    if won:
        _close_unfinished_pages(session, job_id, status, error_message)
        clear_staged_markdown(session, job_id)
    return won


def clear_staged_markdown(session: Session, job_id: uuid.UUID) -> None:
    """Drop the Markdown the job's pages kept for finalize (Page.staged_markdown): the
    job has ended, and S3 holds each page's own copy. No page can keep more after this:
    its result write is fenced on `running`, which no page of an ended job is."""
    session.execute(
        update(Page)
        .where(Page.job_id == job_id, Page.staged_markdown.is_not(None))
        .values(staged_markdown=None)
        .execution_options(synchronize_session=False)
    )


def _close_unfinished_pages(
    session: Session, job_id: uuid.UUID, status: JobStatus, why: str | None
) -> None:
    # Runs after the job row is locked by the update above, so a page inserted or
    # finished concurrently is either committed before this statement sees it or
    # refused (insert_page and finish_page wait on, or check, the job's state).
    reason = f"Not run: the job {status.value}" + (f" ({why})" if why else "") + "."
    session.execute(
        update(Page)
        .where(Page.job_id == job_id, Page.status.not_in(TERMINAL_PAGE_STATUSES))
        .values(
            status=PageStatus.cancelled,
            finished_at=func.now(),
            lease_expires_at=None,
            error=reason[:1000],
        )
    )


def try_advisory_xact_lock(session: Session, key: int) -> bool:
    """Take the Postgres advisory lock `key` until this transaction ends, if no other
    transaction holds it: one holder at a time across every process."""
    return bool(session.scalar(text("SELECT pg_try_advisory_xact_lock(:key)"), {"key": key}))


# --- Recovery: work whose message was lost. Each query touches what it returns,
# so one lost message is published again once per stale period, not every tick.


def _stale(column: Any, stale: timedelta) -> Any:
    return column < func.now() - stale


def take_stale_queued_jobs(session: Session, stale: timedelta) -> list[uuid.UUID]:
    return list(
        session.scalars(
            update(Job)
            .where(Job.status == JobStatus.queued, _stale(Job.updated_at, stale))
            .values(updated_at=func.now())
            .returning(Job.id)
        )
    )


def take_abandoned_prepares(session: Session, stale: timedelta) -> list[uuid.UUID]:
    """Running jobs whose prepare lease ran out before every page was recorded."""
    return list(
        session.scalars(
            update(Job)
            .where(
                Job.status == JobStatus.running,
                Job.prepare_lease_expires_at < func.now(),
                _stale(Job.updated_at, stale),
            )
            .values(updated_at=func.now())
            .returning(Job.id)
        )
    )


def take_stranded_pages(session: Session, stale: timedelta) -> list[QueuedPage]:
    """Pages queued with no message in sight, or running on a lease that ran out."""
    job_is_live = (
        select(Job.id).where(Job.id == Page.job_id, Job.status == JobStatus.running).exists()
    )
    queued_too_long = (Page.status == PageStatus.queued) & _stale(Page.updated_at, stale)
    lease_ran_out = (
        (Page.status == PageStatus.running)
        & (Page.lease_expires_at < func.now())
        & _stale(Page.updated_at, stale)
    )
    rows = session.execute(
        update(Page)
        .where(job_is_live, queued_too_long | lease_ran_out)
        .values(updated_at=func.now())
        .returning(Page.id, Page.engine, Page.license_use)
    )
    return [QueuedPage(row[0], row[1] or "", row[2]) for row in rows]


def fail_pages_nobody_can_run(
    session: Session, engine: str, wait: timedelta, why: str
) -> list[tuple[int, uuid.UUID]]:
    """Fail the waiting pages of live jobs routed to `engine` when no worker able to run
    them (the licence class included) has been alive within `wait`. Returns (page id,
    job id) of each page failed."""
    job_is_live = (
        select(Job.id).where(Job.id == Page.job_id, Job.status == JobStatus.running).exists()
    )
    waiting = (Page.status == PageStatus.queued) | (
        (Page.status == PageStatus.running) & (Page.lease_expires_at < func.now())
    )
    licence_fits = (
        (Page.license_use != LicenseUse.commercial)
        | Worker.model_permits_commercial
        | Worker.deployment_license_reference.is_not(None)
    )
    someone_able = (
        select(Worker.id)
        .where(Worker.engine == engine, Worker.heartbeat_at > func.now() - wait, licence_fits)
        .exists()
    )
    rows = session.execute(
        update(Page)
        .where(Page.engine == engine, job_is_live, waiting, ~someone_able)
        .values(
            status=PageStatus.failed,
            error=why[:1000],
            finished_at=func.now(),
            lease_expires_at=None,
        )
        .returning(Page.id, Page.job_id)
    )
    return [(row[0], row[1]) for row in rows]


def take_unfinalized_jobs(session: Session, stale: timedelta) -> list[uuid.UUID]:
    """Running jobs, fully prepared, whose pages have all ended but which never finalized."""
    unfinished = (
        select(Page.id)
        .where(Page.job_id == Job.id, Page.status.not_in(TERMINAL_PAGE_STATUSES))
        .exists()
    )
    recorded = select(func.count(Page.id)).where(Page.job_id == Job.id).scalar_subquery()
    return list(
        session.scalars(
            update(Job)
            .where(
                Job.status == JobStatus.running,
                Job.prepare_lease_expires_at.is_(None),
                # A start under way (waiting out an outage, say) is not lost.
                _finalize_lease_free(),
                ~unfinished,
                recorded >= Job.pages_total,
                _stale(Job.updated_at, stale),
            )
            .values(updated_at=func.now())
            .returning(Job.id)
        )
    )


def count_prepare_failure(session: Session, job_id: uuid.UUID, attempt: int, why: str) -> int:
    """Count a renderer failure and release the lease at once, so the retry need not
    wait for it to run out; the reason is kept for the claims cap. Returns the failures
    so far."""
    failures = session.scalar(
        update(Job)
        .where(Job.id == job_id, Job.prepare_attempts == attempt)
        .values(
            prepare_failures=Job.prepare_failures + 1,
            prepare_lease_expires_at=func.now(),
            error_message=why[:1000],
        )
        .returning(Job.prepare_failures)
    )
    return int(failures or 0)


def running_prepare_attempt(session: Session, job_id: uuid.UUID) -> int | None:
    """The attempt of a running job whose prepare holds a live lease, or None (a
    failure already counted released the lease)."""
    return session.scalar(
        select(Job.prepare_attempts)
        .where(
            Job.id == job_id,
            Job.status == JobStatus.running,
            Job.prepare_lease_expires_at > func.now(),
        )
        .with_for_update()
    )


def _finalize_lease_free() -> Any:
    return Job.finalize_lease_expires_at.is_(None) | (Job.finalize_lease_expires_at < func.now())


def start_finalize(session: Session, job_id: uuid.UUID, lease: timedelta) -> int | None:
    """Count a finalize start of a running job and take its lease; returns its starts so
    far, or None when the job is not running or another start holds a live lease. The
    first start clears what an earlier stage left in `error_message` (prepare keeps its
    last outage there), so the last error a capped finalize reports is its own."""
    return session.scalar(
        update(Job)
        .where(Job.id == job_id, Job.status == JobStatus.running, _finalize_lease_free())
        .values(
            finalize_attempts=Job.finalize_attempts + 1,
            finalize_lease_expires_at=func.now() + lease,
            error_message=case((Job.finalize_attempts == 0, None), else_=Job.error_message),
        )
        .returning(Job.finalize_attempts)
        .execution_options(synchronize_session=False)
    )


def renew_finalize_lease(session: Session, job_id: uuid.UUID, lease: timedelta) -> None:
    """Hold the lease again for a retry of the start under way (through an outage)."""
    session.execute(
        update(Job)
        .where(Job.id == job_id, Job.status == JobStatus.running)
        .values(finalize_lease_expires_at=func.now() + lease)
        .execution_options(synchronize_session=False)
    )


def record_finalize_failure(session: Session, job_id: uuid.UUID, why: str) -> int | None:
    """Keep why a finalize attempt of a running job failed and let go of its lease, so
    the next start may begin at once; returns its starts so far, or None when the job is
    not running (another attempt ended it)."""
    return session.scalar(
        update(Job)
        .where(Job.id == job_id, Job.status == JobStatus.running)
        .values(error_message=why[:1000], finalize_lease_expires_at=None)
        .returning(Job.finalize_attempts)
        .execution_options(synchronize_session=False)
    )


def release_prepare(session: Session, job_id: uuid.UUID, attempt: int, why: str) -> None:
    """Free the prepare lease after an outage; the reason is kept in case it recurs
    until the claims run out."""
    session.execute(
        update(Job)
        .where(Job.id == job_id, Job.prepare_attempts == attempt, Job.status == JobStatus.running)
        .values(prepare_lease_expires_at=func.now(), error_message=why[:1000])
    )


# --- Idempotency keys of job submissions (pagemill.jobs.idempotency).


def delete_expired_idempotency_key(
    session: Session, client_id: uuid.UUID, key: str, ttl: timedelta
) -> None:
    session.execute(
        delete(IdempotencyKey).where(
            IdempotencyKey.client_id == client_id,
            IdempotencyKey.key == key,
            IdempotencyKey.created_at < func.now() - ttl,
        )
    )


def insert_idempotency_key(
    session: Session, client_id: uuid.UUID, key: str, request_sha256: str
) -> bool:
    """Claim the key; False when the client already holds it."""
    claimed = session.execute(
        insert(IdempotencyKey)
        .values(client_id=client_id, key=key, request_sha256=request_sha256)
        .on_conflict_do_nothing()
        .returning(IdempotencyKey.key)
    ).one_or_none()
    return claimed is not None


def lock_idempotency_key(session: Session, client_id: uuid.UUID, key: str) -> IdempotencyKey | None:
    return session.scalar(
        select(IdempotencyKey)
        .where(IdempotencyKey.client_id == client_id, IdempotencyKey.key == key)
        .with_for_update()
    )


def renew_abandoned_idempotency_key(
    session: Session, client_id: uuid.UUID, key: str, abandoned_after: timedelta
) -> bool:
    """Take over a key whose first request has been in flight longer than
    `abandoned_after`; False when it has not."""
    renewed = session.execute(
        update(IdempotencyKey)
        .where(
            IdempotencyKey.client_id == client_id,
            IdempotencyKey.key == key,
            IdempotencyKey.created_at < func.now() - abandoned_after,
        )
        .values(created_at=func.now())
        .returning(IdempotencyKey.key)
    ).one_or_none()
    return renewed is not None


def store_idempotent_response(
    session: Session,
    client_id: uuid.UUID,
    key: str,
    job_id: uuid.UUID,
    status: int,
    body: dict[str, Any],
) -> None:
    session.execute(
        update(IdempotencyKey)
        .where(IdempotencyKey.client_id == client_id, IdempotencyKey.key == key)
        .values(job_id=job_id, response_status=status, response_body=body)
    )


def delete_unanswered_idempotency_key(session: Session, client_id: uuid.UUID, key: str) -> None:
    session.execute(
        delete(IdempotencyKey).where(
            IdempotencyKey.client_id == client_id,
            IdempotencyKey.key == key,
            IdempotencyKey.response_status.is_(None),
        )
    )


# --- Retention and purge (pagemill.jobs.purge). `purged_at` is the fence: set, and
# committed, before any object is removed; status `purged` once they all are.


def fence_purge(session: Session, job_id: uuid.UUID) -> bool:
    """Begin purging an ended job (a second purge keeps the first time). False when the
    job has not ended, and nothing is changed."""
    fenced = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.status.in_(TERMINAL_JOB_STATUSES))
        .values(purged_at=func.coalesce(Job.purged_at, func.now()))
        .returning(Job.id)
        .execution_options(synchronize_session=False)
    ).one_or_none()
    return fenced is not None


def mark_purged(session: Session, job_id: uuid.UUID) -> None:
    session.execute(
        update(Job)
        .where(Job.id == job_id, Job.purged_at.is_not(None))
        .values(status=JobStatus.purged)
        .execution_options(synchronize_session=False)
    )


def purge_started(session: Session, job_id: uuid.UUID) -> bool:
    return session.scalar(select(Job.purged_at.is_not(None)).where(Job.id == job_id)) is True


def fence_expired_jobs(
    session: Session, default_retention_days: int | None, limit: int
) -> list[uuid.UUID]:
    """Fence up to `limit` ended jobs older than their client's retention, oldest first.
    SKIP LOCKED: a job being fenced by another caller is left to it."""
    retention_days = func.coalesce(Client.retention_days, default_retention_days)
    expired = (
        select(Job.id)
        .join(Client, Client.id == Job.client_id)
        .where(
            Job.purged_at.is_(None),
            Job.finished_at.is_not(None),
            Job.status.in_(TERMINAL_JOB_STATUSES),
            retention_days.is_not(None),
            Job.finished_at < func.now() - func.make_interval(0, 0, 0, retention_days),
        )
        .order_by(Job.finished_at)
        .limit(limit)
        .with_for_update(of=Job, skip_locked=True)
    )
    return list(
        session.scalars(
            update(Job)
            .where(Job.id.in_(expired.scalar_subquery()))
            .values(purged_at=func.now())
            .returning(Job.id)
            .execution_options(synchronize_session=False)
        )
    )


def unfinished_purges(session: Session, stale: timedelta, limit: int) -> list[uuid.UUID]:
    """Jobs fenced longer than `stale` ago whose objects were not all removed (an outage,
    or a process that died mid-purge)."""
    return list(
        session.scalars(
            select(Job.id)
            .where(
                Job.purged_at < func.now() - stale,
                Job.status != JobStatus.purged,
            )
            .order_by(Job.purged_at)
            .limit(limit)
        )
    )


# --- The result cache (pagemill.jobs.result_cache).


def latest_cached_candidate(session: Session, client_id: uuid.UUID, cache_key: str) -> Job | None:
    """The client's newest succeeded, unpurged job with this cache key."""
    return session.scalar(
        select(Job)
        .where(
            Job.client_id == client_id,
            Job.cache_key == cache_key,
            Job.status == JobStatus.succeeded,
            Job.purged_at.is_(None),
        )
        .order_by(Job.finished_at.desc())
        .limit(1)
    )


def hold_unpurged(session: Session, job_id: uuid.UUID) -> bool:
    """Whether the job has not begun a purge; FOR SHARE keeps a purge from beginning
    until this transaction ends."""
    held = session.scalar(
        select(Job.id).where(Job.id == job_id, Job.purged_at.is_(None)).with_for_update(read=True)
    )
    return held is not None


# --- Documents given by URL: what the worker's fetch learnt of the source.


def record_fetched_source(
    session: Session,
    job_id: uuid.UUID,
    attempt: int,
    *,
    kind: SourceKind,
    size_bytes: int,
    sha256: str,
    extraction_restricted: bool,
    document_pages: int,
    pages_total: int,
) -> bool:
    """Fill in the source's facts once its fetch is stored. Fenced by the prepare
    attempt, so an attempt that outlived its lease changes nothing."""
    result = session.execute(
        update(Job)
        .where(
            Job.id == job_id,
            Job.prepare_attempts == attempt,
            Job.status == JobStatus.running,
        )
        .values(
            source_kind=kind,
            source_bytes=size_bytes,
            source_sha256=sha256,
            source_extraction_restricted=extraction_restricted,
            document_pages=document_pages,
            pages_total=pages_total,
        )
        .returning(Job.id)
    )
    return result.one_or_none() is not None


# --- Batches: jobs submitted together (pagemill.batches), and when the last one ends.


@dataclass(frozen=True)
class BatchTotals:
    jobs_by_status: dict[str, int]
    cost_usd: Decimal
    device_seconds: float

    @property
    def ended(self) -> int:
        return sum(
            count for status, count in self.jobs_by_status.items() if JobStatus(status).is_terminal
        )


def lock_open_batch_of(session: Session, job_id: uuid.UUID) -> Batch | None:
    """The batch of `job_id` if it has not completed yet, its row locked until this
    transaction ends. Every transaction ending one of its jobs takes this lock before
    counting what is left, so the last two cannot both see the other still running."""
    batch_id = session.scalar(select(Job.batch_id).where(Job.id == job_id))
    if batch_id is None:
        return None
    return session.scalars(
        select(Batch)
        .where(Batch.id == batch_id, Batch.completed_at.is_(None))
        .with_for_update()
        .execution_options(populate_existing=True)
    ).one_or_none()


def batch_has_unfinished_jobs(session: Session, batch_id: uuid.UUID) -> bool:
    unfinished = select(Job.id).where(
        Job.batch_id == batch_id, Job.status.in_([JobStatus.queued, JobStatus.running])
    )
    return bool(session.scalar(select(unfinished.exists())))


def mark_batch_completed(session: Session, batch_id: uuid.UUID) -> None:
    session.execute(update(Batch).where(Batch.id == batch_id).values(completed_at=func.now()))


def batch_totals(session: Session, batch_id: uuid.UUID) -> BatchTotals:
    """Jobs by status, and what their pages have cost so far."""
    by_status = session.execute(
        select(Job.status, func.count()).where(Job.batch_id == batch_id).group_by(Job.status)
    ).all()
    cost, seconds = session.execute(
        select(
            func.coalesce(func.sum(Page.cost_usd), 0),
            func.coalesce(func.sum(Page.device_seconds), 0.0),
        )
        .join(Job, Job.id == Page.job_id)
        .where(Job.batch_id == batch_id)
    ).one()
    return BatchTotals(
        jobs_by_status={status.value: count for status, count in by_status},
        cost_usd=Decimal(cost or 0),
        device_seconds=float(seconds or 0.0),
    )
