"""What the API returns for jobs."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, Field

from pagemill.accounting.totals import job_usage
from pagemill.db.models import Job, Page
from pagemill.domain import JobStatus, LicenseUse, PageStatus
from pagemill.jobs.metadata import renderable_metadata
from pagemill.jobs.summaries import job_quality, page_summary
from pagemill.quality.furniture import FurnitureMode


class PageCounts(BaseModel):
    total: int = Field(description="Pages selected for this job.")
    done: int = Field(description="Pages that have ended, whatever the outcome.")
    queued: int
    running: int
    succeeded: int
    failed: int
    cancelled: int


class SourceOut(BaseModel):
    filename: str | None
    url: str | None = Field(
        description="The source_url the job was submitted with; the facts below are null "
        "until the worker has fetched it."
    )
    kind: str | None
    bytes: int | None
    sha256: str | None
    document_pages: int | None
    page_selection: str | None
    # The PDF's owner withheld the permission to extract its text (it opened without
    # a password, so it was converted anyway).
    extraction_restricted: bool


class ErrorOut(BaseModel):
    code: str
    message: str


class UsageOut(BaseModel):
    prompt_tokens: int = Field(description="Tokens the model read (GPU engines).")
    output_tokens: int = Field(description="Tokens the model wrote (GPU engines).")
    device_seconds: float = Field(description="Device time attributed to the pages.")
    spec_draft_tokens: int
    spec_accepted_tokens: int
    acceptance_rate: float | None = Field(
        description="Accepted / drafted speculative tokens; None without speculation."
    )


class JobOut(BaseModel):
    id: uuid.UUID
    batch_id: uuid.UUID | None
    status: JobStatus
    license_use: LicenseUse
    engine: str
    webhook_url: str | None
    metadata: dict[str, Any]
    source: SourceOut
    pages: PageCounts
    compute_seconds: float = Field(
        deprecated=True,
        description="Deprecated, to be removed in the next release: the same sum as "
        "usage.device_seconds.",
    )
    cost_usd: Decimal
    quote_usd: Decimal | None
    max_cost_usd: Decimal | None
    usage: UsageOut
    quality: dict[str, Any] = Field(
        description="Mean page quality score, the worst page's verdict, pages by verdict."
    )
    furniture: FurnitureMode = Field(
        description="Running headers, footers and page numbers: separate (out of "
        "document.md, listed per page), inline or drop."
    )
    error: ErrorOut | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    purged_at: datetime | None = Field(
        description="When the job's stored objects began to be purged (retention or a "
        "request); its results answer 410 `purged` from then on."
    )
    cached_from: uuid.UUID | None = Field(
        description="The earlier job whose stored result this one reuses: no engine ran "
        "and nothing was charged."
    )
    links: dict[str, str]


class JobDetailOut(JobOut):
    page_details: list[dict[str, Any]] = Field(description="One summary per page, in order.")


class JobListOut(BaseModel):
    jobs: list[JobOut]
    limit: int
    offset: int


def job_out(job: Job, pages: list[Page], base_url: str) -> JobOut:
    return JobOut(**_job_fields(job, pages, base_url))


def job_detail_out(job: Job, pages: list[Page], base_url: str) -> JobDetailOut:
    return JobDetailOut(
        **_job_fields(job, pages, base_url), page_details=[page_summary(p) for p in pages]
    )


def _job_fields(job: Job, pages: list[Page], base_url: str) -> dict[str, Any]:
    counts = {status: 0 for status in PageStatus}
    for page in pages:
        counts[page.status] += 1
    done = counts[PageStatus.succeeded] + counts[PageStatus.failed] + counts[PageStatus.cancelled]
    # Pages prepare has not reached yet are queued from the caller's point of view.
    not_yet_prepared = max(0, (job.pages_total or 0) - len(pages))
    if job.status is JobStatus.cancelled:
        counts[PageStatus.cancelled] += not_yet_prepared
        done += not_yet_prepared
        not_yet_prepared = 0
    self_url = f"{base_url.rstrip('/')}/v1/jobs/{job.id}"
    usage = job_usage(pages)
    return {
        "id": job.id,
        "batch_id": job.batch_id,
        "status": job.status,
        "license_use": job.license_use,
        "engine": job.engine,
        "webhook_url": job.webhook_url,
        "metadata": renderable_metadata(job.caller_metadata),
        "source": SourceOut(
            filename=job.source_filename,
            url=job.source_url,
            kind=job.source_kind.value if job.source_kind else None,
            bytes=job.source_bytes,
            sha256=job.source_sha256,
            document_pages=job.document_pages,
            page_selection=job.page_selection,
            extraction_restricted=job.source_extraction_restricted,
        ),
        "pages": PageCounts(
            total=job.pages_total or 0,
            done=done,
            queued=counts[PageStatus.queued] + not_yet_prepared,
            running=counts[PageStatus.running],
            succeeded=counts[PageStatus.succeeded],
            failed=counts[PageStatus.failed],
            cancelled=counts[PageStatus.cancelled],
        ),
        "compute_seconds": usage.device_seconds,
        "quote_usd": job.quote_usd,
        "max_cost_usd": job.max_cost_usd,
        "usage": _usage(pages, usage.device_seconds),
        "quality": job_quality(pages),
        "furniture": job.furniture,
        "cost_usd": usage.cost_usd,
        "error": ErrorOut(code=job.error_code, message=job.error_message or "")
        if job.error_code
        else None,
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "purged_at": job.purged_at,
        "cached_from": job.cached_from,
        "links": {"self": self_url, "markdown": f"{self_url}/markdown"},
    }


def _usage(pages: list[Page], device_seconds: float) -> UsageOut:
    drafted = sum(page.spec_draft_tokens or 0 for page in pages)
    accepted = sum(page.spec_accepted_tokens or 0 for page in pages)
    return UsageOut(
        prompt_tokens=sum(page.prompt_tokens or 0 for page in pages),
        output_tokens=sum(page.output_tokens or 0 for page in pages),
        device_seconds=device_seconds,
        spec_draft_tokens=drafted,
        spec_accepted_tokens=accepted,
        acceptance_rate=accepted / drafted if drafted else None,
    )
