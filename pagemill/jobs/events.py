"""A job's terminal event: its body, thin, with links to the results rather than the
results, recorded in the webhook outbox (pagemill.webhooks.outbox).

Built once, in the transaction that ends the job, and stored as the exact bytes
every attempt and replay sends. Presigned links therefore live as long as the S3
maximum (7 days), longer than the retry schedule; the API links never expire.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy.orm import Session

from pagemill.accounting.totals import job_usage
from pagemill.db.models import Job
from pagemill.domain import JobStatus
from pagemill.jobs import repository
from pagemill.jobs.metadata import renderable_metadata
from pagemill.jobs.summaries import job_quality
from pagemill.settings import Settings, get_settings
from pagemill.storage import JobKeys, ObjectStore, get_object_store
from pagemill.webhooks import outbox as webhook_outbox
from pagemill.webhooks.urls import MAX_URL_CHARS

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobTotals:
    """What the job's pages add up to when it ends."""

    pages_by_status: dict[str, int]
    cost_usd: Decimal
    device_seconds: float
    quality: dict[str, Any] | None = None  # mean score, worst verdict, pages by verdict


def event_type(status: JobStatus) -> str:
    return f"job.{status.value}"


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def page_counts(job: Job, totals: JobTotals) -> dict[str, int]:
    counts = {
        status: totals.pages_by_status.get(status, 0)
        for status in ("succeeded", "failed", "cancelled", "queued", "running")
    }
    if job.status is JobStatus.cancelled:
        # The event is written as the job is cancelled, a moment before its queued
        # pages (and those prepare never reached) are: they will not run.
        unprepared = max(0, (job.pages_total or 0) - sum(counts.values()))
        counts["cancelled"] += counts.pop("queued") + unprepared
    else:
        counts.pop("queued")
    return {"total": job.pages_total or 0, **counts}


# The failure that worker.stages.finalize records after storing document.md; other
# failures (in prepare, or storing the result) leave no document to link to.
FAILED_WITH_DOCUMENT = "pages_failed"


def _document_written(job: Job) -> bool:
    return job.status is JobStatus.succeeded or (
        job.status is JobStatus.failed and job.error_code == FAILED_WITH_DOCUMENT
    )


def _presigned(store: ObjectStore, key: str, expiry: timedelta) -> dict[str, str] | None:
    expires_at = datetime.now(UTC) + expiry
    try:
        url = store.presigned_get_url(key, expiry)
    except Exception:
        # Signing is local, but the first use may ask S3 for the bucket's region; an
        # S3 outage must not stop the job from ending. The API links still work.
        log.warning("could not presign %s; the event carries API links only", key, exc_info=True)
        return None
    return {"url": url, "expires_at": _iso(expires_at)}


def links(job: Job, settings: Settings, store: ObjectStore | None) -> dict[str, Any]:
    job_url = f"{settings.api_base_url.rstrip('/')}/v1/jobs/{job.id}"
    result: dict[str, Any] = {"job": job_url, "webhook_deliveries": f"{job_url}/webhook-deliveries"}
    if not _document_written(job):
        return result
    result["markdown"] = f"{job_url}/markdown"
    if store is not None:
        expiry = timedelta(seconds=settings.webhook_link_expiry_s)
        keys = JobKeys(job.id)
        named = (("markdown_presigned", keys.document), ("manifest_presigned", keys.manifest))
        for name, key in named:
            presigned = _presigned(store, key, expiry)
            if presigned is not None:
                result[name] = presigned
    return result


def build_body(job: Job, totals: JobTotals, settings: Settings, store: ObjectStore | None) -> str:
    """The JSON body of the event that reports `job`'s terminal status."""
    error = {"code": job.error_code, "message": job.error_message} if job.error_code else None
    finished_at = job.finished_at or datetime.now(UTC)
    payload = {
        "type": event_type(job.status),
        "timestamp": _iso(finished_at),
        "data": {
            "job_id": str(job.id),
            "status": job.status.value,
            "error": error,
            "pages": page_counts(job, totals),
            "cost_usd": str(totals.cost_usd),
            "device_seconds": round(totals.device_seconds, 3),
            # The old name of device_seconds, kept for one release.
            "compute_seconds": round(totals.device_seconds, 3),
            "quality": totals.quality,
            "license_use": job.license_use.value,
            "metadata": renderable_metadata(job.caller_metadata),
            "created_at": _iso(job.created_at),
            "finished_at": _iso(finished_at),
            "links": links(job, settings, store),
        },
    }
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


def job_totals(session: Session, job_id: uuid.UUID) -> JobTotals:
    pages = repository.list_pages(session, job_id)
    usage = job_usage(pages)
    return JobTotals(
        pages_by_status=dict(Counter(page.status.value for page in pages)),
        cost_usd=usage.cost_usd,
        device_seconds=usage.device_seconds,
        quality=job_quality(pages),
    )


def record_job_event(
    session: Session,
    job_id: uuid.UUID,
    settings: Settings | None = None,
    store: ObjectStore | None = None,
) -> uuid.UUID | None:
    """Write the event for a job that has just become terminal, and its delivery.

    Called inside the transaction whose conditional update ended the job, so the
    event commits (or rolls back) with the transition: once per transition. The
    unique (job_id, type) makes a second one impossible even so."""
    job = repository.reload_job(session, job_id)
    if job is None or not job.webhook_url or not job.status.is_terminal:
        return None
    if len(job.webhook_url) > MAX_URL_CHARS:
        log.warning("job %s: webhook URL over %d characters; no event", job_id, MAX_URL_CHARS)
        return None
    settings = settings or get_settings()
    body = build_body(job, job_totals(session, job_id), settings, store or get_object_store())
    return webhook_outbox.record_event(
        session, job.client_id, job.id, event_type(job.status), body, job.webhook_url
    )
