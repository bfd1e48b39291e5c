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
from pagemill.db.session import session_factory
from pagemill.webhooks import repository, signing
from pagemill.webhooks.repository import DeliveryView

log = logging.getLogger(__name__)

Publish = Callable[[str], None]

SWEEP_BATCH = 500


def record_event(
    session: Session,
    client_id: uuid.UUID,
    job_id: uuid.UUID,
    event_type: str,
    body: str,
    url: str,
) -> uuid.UUID | None:
    """Write an event and its delivery to `url` in the caller's transaction, the one
    that ends the job (pagemill.jobs.events), so it commits or rolls back with the
    transition. The unique (job_id, type) makes a second one impossible."""
    event_id = repository.insert_event(session, client_id, job_id, event_type, body)
    if event_id is None:
        return None
    endpoint_id = repository.upsert_endpoint(session, client_id, url)
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


def publish_job_webhooks(job_id: uuid.UUID) -> None:
    """After the commit that ended a job. If the broker is down, the reaper publishes."""
    try:
        publish_job_deliveries(session_factory(), job_id)
    except Exception:
        log.exception("could not publish webhooks of job %s; left for the reaper", job_id)


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


def replay_delivery(
    session: Session,
    delivery_id: uuid.UUID,
    client_id: uuid.UUID | None,
    publish: Publish = queue.publish_webhook_delivery,
) -> DeliveryView | None:
    """Send a delivery's event again and return the new delivery, or None if there is no
    such delivery of `client_id`'s (of anyone's when None: an operator's replay).

    Same webhook-id, same body, new timestamp and signature. Asking for a replay
    re-enables an endpoint a 410 disabled. Commits the session, then publishes; if the
    broker is down, the reaper publishes the committed delivery instead.
    """
    original = repository.get_delivery(session, delivery_id, client_id)
    if original is None:
        return None
    repository.enable_endpoint(session, original.endpoint.id)
    replay_id = repository.insert_delivery(
        session,
        original.event.id,
        original.endpoint.id,
        replay_of_id=original.delivery.id,
        published=True,  # published below, once this commits
    )
    session.commit()
    try:
        publish(str(replay_id))
    except Exception:
        log.exception("could not publish webhook delivery %s; left for the reaper", replay_id)
    replayed = repository.get_delivery(session, replay_id, None)
    assert replayed is not None  # committed above
    return replayed


def rotate_secret(
    session: Session, client_id: uuid.UUID, overlap: timedelta
) -> tuple[str, datetime | None]:
    """A new signing secret; the old one keeps signing alongside it for `overlap`."""
    secret = signing.new_secret()
    return secret, repository.rotate_secret(session, client_id, secret, overlap)
