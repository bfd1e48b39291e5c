"""How a job ends: the one transition every ending goes through, with its event.

Kept apart from the submission service so that the workers, which end jobs, do not load
what submit needs (document inspection and its libraries).
"""

from __future__ import annotations

import uuid

from sqlalchemy.orm import Session

from pagemill.domain import JobStatus
from pagemill.jobs import batch_completion, events, repository


def end_job(
    session: Session,
    job_id: uuid.UUID,
    status: JobStatus,
    error_code: str | None = None,
    error_message: str | None = None,
) -> bool:
    """Make a running job terminal and record its event (the webhook outbox) in the same
    transaction, so the event commits or rolls back with the transition. Exactly one
    caller wins, however many try; every way a job ends comes through here."""
    won = repository.complete_job(session, job_id, status, error_code, error_message)
    if won:
        events.record_job_event(session, job_id)
        batch_completion.note_job_ended(session, job_id)
    return won


def cancel_job(session: Session, job_id: uuid.UUID) -> bool:
    """Cancel a job that has not ended; pages not yet finished will not run."""
    return end_job(session, job_id, JobStatus.cancelled, "cancelled", "Cancelled.")
