"""The job a request for stored results reads: the caller's own, and not purged.

Every endpoint that serves a job's objects (its document, manifest, page Markdown, page
images...) takes its job from `ResultJobDep`, so a purged job answers 410 `purged`
everywhere, from the moment its purge begins, and never 404 or 500.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import Depends

from api.deps import ClientDep, SessionDep
from api.errors import ApiError
from pagemill.db.models import Client, Job
from pagemill.jobs import repository


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
