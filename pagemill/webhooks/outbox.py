"""The outbox: an event is written in the transaction that ends its job, and published
after that commits. Whatever is committed but not published (a path that ends jobs
without publishing, a crash in between, a broker outage, a retry due too far ahead
for a delayed message) is published by the reaper through `due_deliveries`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from pagemill import queue
from pagemill.settings import Settings, get_settings
from pagemill.storage import ObjectStore, get_object_store
from pagemill.webhooks import payload, repository, signing
from pagemill.webhooks.repository import DeliveryView
from pagemill.webhooks.urls import MAX_URL_CHARS

log = logging.getLogger(__name__)

Publish = Callable[[str], None]

SWEEP_BATCH = 500


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
    body = payload.build_body(
        job, repository.job_totals(session, job_id), settings, store or get_object_store()
    )
    event_id = repository.insert_event(
        session, job.client_id, job.id, payload.event_type(job.status), body
    )
    if event_id is None:
        return None
    endpoint_id = repository.upsert_endpoint(session, job.client_id, job.webhook_url)
    repository.insert_delivery(session, event_id, endpoint_id)
    return event_id


def publish_job_deliveries(
    sessions: sessionmaker[Session],
    job_id: uuid.UUID,
    publish: Publish = queue.publish_webhook_delivery,
) -> int:
    """After the commit that ended the job: send its deliveries on their way at once.
    Any path that ends a job without calling this (or a crash before it) leaves them
    to the reaper's next sweep; a failed publish, to the sweep once overdue."""
    with sessions.begin() as session:
        delivery_ids = repository.take_unpublished_deliveries(session, job_id)
    for delivery_id in delivery_ids:
        publish(str(delivery_id))
    return len(delivery_ids)


def due_deliveries(session: Session, stale: timedelta, limit: int = SWEEP_BATCH) -> list[uuid.UUID]:
    """Deliveries due with no message on its way; marked published, so the caller
    must publish them after its transaction commits."""
    return repository.take_due_deliveries(session, stale, limit)


def publish_due_deliveries(
    sessions: sessionmaker[Session],
    stale: timedelta,
    publish: Publish = queue.publish_webhook_delivery,
    limit: int = SWEEP_BATCH,
) -> list[uuid.UUID]:
    """One sweep, for the reaper: publish every delivery that is due but has no
    message (a lost one is taken as lost once `stale` overdue). Duplicates are
    harmless: an attempt claims its delivery conditionally."""
    with sessions.begin() as session:
        delivery_ids = due_deliveries(session, stale, limit)
    for delivery_id in delivery_ids:
        publish(str(delivery_id))
    if delivery_ids:
        log.info("published %d due webhook deliveries", len(delivery_ids))
    return delivery_ids


def replay(session: Session, original: DeliveryView) -> uuid.UUID:
    """A new delivery of the same event: same webhook-id, same body, new timestamp
    and signature. Asking for a replay re-enables an endpoint a 410 disabled."""
    repository.enable_endpoint(session, original.endpoint.id)
    return repository.insert_delivery(
        session,
        original.event.id,
        original.endpoint.id,
        replay_of_id=original.delivery.id,
        published=True,  # the caller publishes once this commits
    )


def rotate_secret(
    session: Session, client_id: uuid.UUID, overlap: timedelta
) -> tuple[str, datetime | None]:
    """A new signing secret; the old one keeps signing alongside it for `overlap`."""
    secret = signing.new_secret()
    return secret, repository.rotate_secret(session, client_id, secret, overlap)
