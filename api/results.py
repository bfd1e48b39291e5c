"""The job a request for stored results reads: the caller's own, and not purged.

Every endpoint that serves a job's objects (its document, manifest, page Markdown, page
images...) takes its job from `ResultJobDep`, so a purged job answers 410 `purged`
everywhere, from the moment its purge begins, and never 404 or 500. Those that serve one
page's result take the page from `read_page`, so a page not read yet is refused alike, and
read the object with `read_stored`, so a purge that begins while they run is 410 too.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import Depends
from sqlalchemy.orm import Session

from api.deps import ClientDep, SessionDep
from api.errors import ApiError
from pagemill.db.models import Client, Job, Page
from pagemill.documents.pagerange import selection_includes
from pagemill.domain import TERMINAL_JOB_STATUSES, PageStatus
from pagemill.jobs import repository
from pagemill.storage import ObjectStore


def client_job(session: SessionDep, client: Client, job_id: uuid.UUID) -> Job:
    # Another client's job is reported as missing, not forbidden: its existence is private.
    job = repository.get_client_job(session, client.id, job_id)
    if job is None:
        raise ApiError(404, "job_not_found", "There is no job with this id.")
    return job


def refuse_if_purged(job: Job) -> Job:
    if job.purged_at is not None:
        raise ApiError(
            410,
            "purged",
            f"The job's stored source, pages and results were purged at "
            f"{job.purged_at.isoformat()}; its record remains at /v1/jobs/{job.id}.",
        )
    return job


def result_job(job_id: uuid.UUID, client: ClientDep, session: SessionDep) -> Job:
    return refuse_if_purged(client_job(session, client, job_id))


ResultJobDep = Annotated[Job, Depends(result_job)]


def read_page(session: SessionDep, job: Job, number: int, result: str) -> Page:
    """The job's page `number`, read; else 404 or 409 saying why it has no `result` yet.

    `result` names what the caller serves ("Markdown", "blocks") in the refusals.
    """
    page = repository.get_page_by_number(session, job.id, number)
    if page is None:
        if job.document_pages is None:  # a source still being fetched
            raise ApiError(
                409,
                "page_not_ready",
                f"Page {number} has no {result}; the document is not fetched yet "
                f"(the job is {job.status.value}).",
            )
        if not selection_includes(job.page_selection, job.document_pages, number):
            raise ApiError(404, "page_not_found", f"Page {number} is not part of this job.")
        # Selected, but prepare has not reached it, or the job ended before it did.
        if job.status in TERMINAL_JOB_STATUSES:
            why = f"the job ended ({job.status.value}) before the page was prepared"
        else:
            why = f"the job is {job.status.value} and has not prepared it yet"
        raise ApiError(409, "page_not_ready", f"Page {number} has no {result}; {why}.")
    if page.status is not PageStatus.succeeded:
        raise ApiError(
            409, "page_not_ready", f"Page {number} has no {result}; it is {page.status.value}."
        )
    return page


def read_stored(session: Session, store: ObjectStore, job: Job, key: str) -> bytes | None:
    """The job's object `key`, or None when it is not stored.

    A purge that begins after `job` was read removes the object under this request (the
    fence is committed before any object goes): the job is read again when the object is
    missing or its read fails, so that the request answers 410 `purged`, as every later
    one will, not that the result never existed, nor a 500.
    """
    try:
        stored = store.get_bytes_if_stored(key)
    except Exception:
        # A read the purge cut short (410 below), or a failure of its own.
        refuse_if_purged(repository.reload_job(session, job.id) or job)
        raise
    if stored is None:
        refuse_if_purged(repository.reload_job(session, job.id) or job)
    return stored
