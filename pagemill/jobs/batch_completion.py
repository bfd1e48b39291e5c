"""A batch's one `batch.completed` event, recorded by the transaction that ends its last
job (pagemill.jobs.lifecycle.end_job), in the webhook outbox beside that job's own
event: it commits with the ending, and is published with the job's deliveries.

The batch row is locked before counting what is left, so of two jobs ending at once,
the second to commit sees the first as ended, and exactly one records the event.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from pagemill.db.models import Batch
from pagemill.jobs import repository
from pagemill.jobs.repository import BatchTotals
from pagemill.settings import Settings, get_settings
from pagemill.webhooks import outbox as webhook_outbox
from pagemill.webhooks.urls import MAX_URL_CHARS

BATCH_COMPLETED = "batch.completed"


def note_job_ended(
    session: Session, job_id: uuid.UUID, settings: Settings | None = None
) -> uuid.UUID | None:
    """In the transaction that ended `job_id`: complete its batch if no job of it is
    left running, and record the event. Returns the event's id, if one was recorded."""
    batch = repository.lock_open_batch_of(session, job_id)
    if batch is None or repository.batch_has_unfinished_jobs(session, batch.id):
        return None
    repository.mark_batch_completed(session, batch.id)
    if not batch.webhook_url or len(batch.webhook_url) > MAX_URL_CHARS:
        return None
    body = build_body(batch, repository.batch_totals(session, batch.id), settings or get_settings())
    return webhook_outbox.record_event(
        session, batch.client_id, job_id, BATCH_COMPLETED, body, batch.webhook_url
    )


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def build_body(batch: Batch, totals: BatchTotals, settings: Settings) -> str:
    completed_at = datetime.now(UTC)
    batch_url = f"{settings.api_base_url.rstrip('/')}/v1/batches/{batch.id}"
    payload = {
        "type": BATCH_COMPLETED,
        "timestamp": _iso(completed_at),
        "data": {
            "batch_id": str(batch.id),
            "documents": batch.documents,
            "jobs": totals.jobs_by_status,
            "cost_usd": str(totals.cost_usd),
            "device_seconds": round(totals.device_seconds, 3),
            "created_at": _iso(batch.created_at),
            "completed_at": _iso(completed_at),
            "links": {"batch": batch_url},
        },
    }
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
