"""Rows for tests that need jobs and pages in a state no request makes quickly."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from pagemill.db.models import Job, Page
from pagemill.domain import JobStatus, LicenseUse, PageStatus, SourceKind


def add_job(
    session: Session,
    client_id: uuid.UUID,
    pages: Sequence[Mapping[str, Any]],
    status: JobStatus = JobStatus.succeeded,
) -> Job:
    """A PDF job with one page row per mapping (its Page fields; status defaults to
    succeeded), numbered from 1."""
    job = Job(
        id=uuid.uuid4(),
        client_id=client_id,
        status=status,
        license_use=LicenseUse.non_commercial,
        engine="auto",
        source_kind=SourceKind.pdf,
        source_bytes=1000,
        source_sha256="0" * 64,
        document_pages=len(pages),
        pages_total=len(pages),
    )
    session.add(job)
    session.flush()
    for number, fields in enumerate(pages, start=1):
        session.add(
            Page(job_id=job.id, number=number, **{"status": PageStatus.succeeded, **fields})
        )
    return job
