"""Every SQL statement about batches (how one completes is pagemill.jobs')."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from pagemill.db.models import Batch, Job


def get_client_batch(session: Session, client_id: uuid.UUID, batch_id: uuid.UUID) -> Batch | None:
    return session.scalars(
        select(Batch).where(Batch.id == batch_id, Batch.client_id == client_id)
    ).one_or_none()


def batch_job_ids(session: Session, batch_id: uuid.UUID) -> list[uuid.UUID]:
    """The batch's jobs in the order their documents were sent."""
    return list(
        session.scalars(select(Job.id).where(Job.batch_id == batch_id).order_by(Job.batch_index))
    )
