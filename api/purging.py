"""DELETE /v1/jobs/{id}?purge=true: remove a job's stored objects now, and say what went."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from api.errors import ApiError
from pagemill.db.models import Job
from pagemill.jobs import purge, repository
from pagemill.jobs.schemas import JobOut, job_out
from pagemill.settings import Settings
from pagemill.storage import ObjectStore, StorageUnavailable


class RemovedOut(BaseModel):
    objects: int = Field(description="Objects removed by this request (0 when purged before).")
    bytes: int
    by_kind: dict[str, int] = Field(
        description="Objects removed by kind: source, page_image, page_pdf, page_markdown, "
        "page_blocks, document, manifest, other."
    )


class PurgeOut(BaseModel):
    job: JobOut
    purged_at: datetime | None
    removed: RemovedOut


def purge_now(session: Session, store: ObjectStore, settings: Settings, job: Job) -> PurgeOut:
    """Purge an ended job (the caller cancelled it if it was running)."""
    job_id: uuid.UUID = job.id
    try:
        report = purge.purge_job(session, store, job_id)
    except purge.JobNotEnded:
        # Cancelled a moment ago, so only a job still being submitted gets here.
        raise ApiError(409, "job_not_ended", "The job has not ended yet; try again.") from None
    except StorageUnavailable:
        session.rollback()
        raise ApiError(
            503,
            "storage_unavailable",
            "Object storage failed during the purge. The job's results are no longer "
            "served, and its remaining objects will be removed automatically.",
            headers={"Retry-After": str(int(settings.stale_after_s))},
        ) from None
    job = repository.reload_job(session, job_id) or job
    return PurgeOut(
        job=job_out(job, repository.list_pages(session, job_id), settings.api_base_url),
        purged_at=job.purged_at,
        removed=RemovedOut(objects=report.objects, bytes=report.bytes, by_kind=report.by_kind),
    )
