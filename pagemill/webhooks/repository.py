"""Every SQL statement about webhooks. Like pages, a delivery is claimed with a
conditional update that bumps its attempt counter, and the write that settles an
attempt checks that counter, so duplicate messages change nothing.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Select, func, literal, or_, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from pagemill.db.models import (
    Client,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEvent,
)
from pagemill.domain import DeliveryStatus

# --- The outbox: written in the transaction that ends the job.


def upsert_endpoint(session: Session, client_id: uuid.UUID, url: str) -> uuid.UUID:
    row_id = session.scalar(
        insert(WebhookEndpoint)
        .values(id=uuid.uuid4(), client_id=client_id, url=url)
        # A no-op update, so RETURNING yields the existing row's id too.
        .on_conflict_do_update(index_elements=["client_id", "url"], set_={"url": url})
        .returning(WebhookEndpoint.id)
    )
    assert row_id is not None
    return row_id


def insert_event(
    session: Session, client_id: uuid.UUID, job_id: uuid.UUID, event_type: str, body: str
) -> uuid.UUID | None:
    """The event's id, or None when this job already has this event."""
    return session.scalar(
        insert(WebhookEvent)
        .values(id=uuid.uuid4(), client_id=client_id, job_id=job_id, type=event_type, body=body)
        .on_conflict_do_nothing(index_elements=["job_id", "type"])
        .returning(WebhookEvent.id)
    )


def insert_delivery(
    session: Session,
    event_id: uuid.UUID,
    endpoint_id: uuid.UUID,
    replay_of_id: uuid.UUID | None = None,
    published: bool = False,
) -> uuid.UUID:
    """A pending delivery, due now. `published`: the caller publishes its message right
    after committing; otherwise whoever commits, or else the reaper, takes it to publish."""
    delivery = WebhookDelivery(
        id=uuid.uuid4(),
        event_id=event_id,
        endpoint_id=endpoint_id,
        replay_of_id=replay_of_id,
        status=DeliveryStatus.pending,
        next_attempt_at=func.now(),
        published_at=func.now() if published else None,
    )
    session.add(delivery)
    session.flush()
    return delivery.id


def take_unpublished_deliveries(session: Session, job_id: uuid.UUID) -> list[uuid.UUID]:
    """The job's deliveries no message was published for yet, marked published. The
    reaper takes the same rows the same way, so only one of the two publishes each."""
    return list(
        session.scalars(
            update(WebhookDelivery)
            .where(
                WebhookDelivery.status == DeliveryStatus.pending,
                WebhookDelivery.published_at.is_(None),
                WebhookDelivery.event_id.in_(
                    select(WebhookEvent.id).where(WebhookEvent.job_id == job_id)
                ),
            )
            .values(published_at=func.now())
            .returning(WebhookDelivery.id)
        )
    )


def take_due_deliveries(session: Session, stale: timedelta, limit: int) -> list[uuid.UUID]:
    """Deliveries due with no message on its way: new ones nobody published, those
    scheduled too far ahead for a delayed message, and those whose message is overdue
    (lost). Marks them published."""
    waiting_for_reaper = WebhookDelivery.published_at.is_(None) & (
        WebhookDelivery.next_attempt_at <= func.now()
    )
    overdue = (WebhookDelivery.next_attempt_at < func.now() - stale) & (
        WebhookDelivery.published_at < func.now() - stale
    )
    due = (
        select(WebhookDelivery.id)
        .where(WebhookDelivery.status == DeliveryStatus.pending, or_(waiting_for_reaper, overdue))
        .order_by(WebhookDelivery.next_attempt_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    return list(
        session.scalars(
            update(WebhookDelivery)
            .where(WebhookDelivery.id.in_(due))
            .values(published_at=func.now())
            .returning(WebhookDelivery.id)
        )
    )


# --- Attempts.


@dataclass(frozen=True)
class DeliveryTarget:
    """Everything one attempt needs, read when it is claimed."""

    delivery_id: uuid.UUID
    attempt: int
    event_id: uuid.UUID
    event_type: str
    body: str
    url: str
    endpoint_id: uuid.UUID
    endpoint_disabled_reason: str | None
    signing_secrets: list[str]


LOST = (
    "lost: no outcome was recorded (its worker stopped, or the attempt outlived its lease); "
    "found when the delivery was next claimed"
)


def record_lost_attempts(session: Session, delivery_id: uuid.UUID, up_to: int) -> None:
    """Log every claimed attempt up to `up_to` that recorded nothing, so a lost attempt
    shows in the log and still counts."""
    session.execute(
        insert(WebhookAttempt)
        .from_select(
            ["delivery_id", "number", "started_at", "error"],
            select(
                literal(delivery_id, WebhookAttempt.delivery_id.type),
                func.generate_series(1, up_to),
                func.now(),
                literal(LOST),
            ),
        )
        .on_conflict_do_nothing(index_elements=["delivery_id", "number"])
    )


def give_up_exhausted(session: Session, delivery_id: uuid.UUID, max_attempts: int) -> bool:
    """End a due delivery whose every attempt was claimed already (the last ones lost,
    or they would have settled it). True when this ended it."""
    ended = session.scalar(
        update(WebhookDelivery)
        .where(
            WebhookDelivery.id == delivery_id,
            WebhookDelivery.status == DeliveryStatus.pending,
            WebhookDelivery.next_attempt_at <= func.now(),
            WebhookDelivery.attempts >= max_attempts,
        )
        .values(
            status=DeliveryStatus.dead,
            next_attempt_at=None,
            finished_at=func.now(),
            last_error=func.concat(
                "gave up after ", WebhookDelivery.attempts, " attempts: the last one was lost"
            ),
        )
        .returning(WebhookDelivery.attempts)
    )
    if ended is None:
        return False
    record_lost_attempts(session, delivery_id, ended)
    return True


def claim_delivery(
    session: Session, delivery_id: uuid.UUID, lease: timedelta
) -> DeliveryTarget | None:
    """Take a due delivery for one attempt; None when it is not due, or settled."""
    attempt = session.scalar(
        update(WebhookDelivery)
        .where(
            WebhookDelivery.id == delivery_id,
            WebhookDelivery.status == DeliveryStatus.pending,
            WebhookDelivery.next_attempt_at <= func.now(),
        )
        .values(attempts=WebhookDelivery.attempts + 1, next_attempt_at=func.now() + lease)
        .returning(WebhookDelivery.attempts)
    )
    if attempt is None:
        return None
    record_lost_attempts(session, delivery_id, attempt - 1)
    row = session.execute(
        select(WebhookDelivery, WebhookEvent, WebhookEndpoint, Client)
        .join(WebhookEvent, WebhookEvent.id == WebhookDelivery.event_id)
        .join(WebhookEndpoint, WebhookEndpoint.id == WebhookDelivery.endpoint_id)
        .join(Client, Client.id == WebhookEvent.client_id)
        .where(WebhookDelivery.id == delivery_id)
    ).one()
    _, event, endpoint, client = row
    return DeliveryTarget(
        delivery_id=delivery_id,
        attempt=attempt,
        event_id=event.id,
        event_type=event.type,
        body=event.body,
        url=endpoint.url,
        endpoint_id=endpoint.id,
        endpoint_disabled_reason=endpoint.disabled_reason if endpoint.disabled_at else None,
        signing_secrets=signing_secrets(session, client),
    )


def due_delivery_client(session: Session, delivery_id: uuid.UUID) -> uuid.UUID | None:
    """The client of a delivery that is due for an attempt; None if it is not due."""
    return session.scalar(
        select(WebhookEvent.client_id)
        .join(WebhookDelivery, WebhookDelivery.event_id == WebhookEvent.id)
        .where(
            WebhookDelivery.id == delivery_id,
            WebhookDelivery.status == DeliveryStatus.pending,
            WebhookDelivery.next_attempt_at <= func.now(),
        )
    )


def mark_published(session: Session, delivery_id: uuid.UUID) -> None:
    session.execute(
        update(WebhookDelivery)
        .where(WebhookDelivery.id == delivery_id)
        .values(published_at=func.now())
    )


def signing_secrets(session: Session, client: Client) -> list[str]:
    """The current secret, and the previous one while its overlap lasts."""
    found = [client.webhook_secret]
    expires = client.webhook_previous_secret_expires_at
    if client.webhook_previous_secret and expires is not None:
        now = session.scalar(select(func.now()))
        if now is not None and expires > now:
            found.append(client.webhook_previous_secret)
    return found


def delivery_due_at(session: Session, delivery_id: uuid.UUID) -> datetime | None:
    """When a pending delivery's next attempt is due (None if it is not pending)."""
    return session.scalar(
        select(WebhookDelivery.next_attempt_at).where(
            WebhookDelivery.id == delivery_id, WebhookDelivery.status == DeliveryStatus.pending
        )
    )


@dataclass(frozen=True)
class AttemptRecord:
    started_at: datetime
    destination: str | None
    status_code: int | None
    latency_ms: int | None
    error: str | None
    response_body: str | None


def record_attempt(
    session: Session, delivery_id: uuid.UUID, number: int, record: AttemptRecord
) -> None:
    session.execute(
        insert(WebhookAttempt)
        .values(
            delivery_id=delivery_id,
            number=number,
            started_at=record.started_at,
            destination=record.destination,
            status_code=record.status_code,
            latency_ms=record.latency_ms,
            error=record.error,
            response_body=record.response_body,
        )
        .on_conflict_do_nothing(index_elements=["delivery_id", "number"])
    )


def settle_attempt(
    session: Session,
    delivery_id: uuid.UUID,
    attempt: int,
    status: DeliveryStatus,
    record: AttemptRecord,
    last_error: str | None,
    retry_in: timedelta | None = None,
    message_follows: bool = False,
) -> bool:
    """Write an attempt's outcome, only if that attempt still holds the delivery.
    `retry_in` schedules the next attempt; `message_follows` says a delayed message
    is published for it (otherwise the reaper publishes it when due)."""
    finished = status is not DeliveryStatus.pending
    result = session.execute(
        update(WebhookDelivery)
        .where(
            WebhookDelivery.id == delivery_id,
            WebhookDelivery.attempts == attempt,
            WebhookDelivery.status == DeliveryStatus.pending,
        )
        .values(
            status=status,
            last_status_code=record.status_code,
            last_error=last_error,
            next_attempt_at=None if finished or retry_in is None else func.now() + retry_in,
            published_at=func.now() if message_follows else None,
            finished_at=func.now() if finished else None,
        )
        .returning(WebhookDelivery.id)
    )
    return result.one_or_none() is not None


def disable_endpoint(session: Session, endpoint_id: uuid.UUID, reason: str) -> None:
    session.execute(
        update(WebhookEndpoint)
        .where(WebhookEndpoint.id == endpoint_id, WebhookEndpoint.disabled_at.is_(None))
        .values(disabled_at=func.now(), disabled_reason=reason)
    )


def enable_endpoint(session: Session, endpoint_id: uuid.UUID) -> None:
    session.execute(
        update(WebhookEndpoint)
        .where(WebhookEndpoint.id == endpoint_id)
        .values(disabled_at=None, disabled_reason=None)
    )


# --- Reading, for the API.


@dataclass(frozen=True)
class DeliveryView:
    delivery: WebhookDelivery
    event: WebhookEvent
    endpoint: WebhookEndpoint
    client_name: str
    attempts: list[WebhookAttempt]


ViewQuery = Select[WebhookDelivery, WebhookEvent, WebhookEndpoint, str]


def _views(session: Session, query: ViewQuery) -> list[DeliveryView]:
    rows = session.execute(query).all()
    ids = [delivery.id for delivery, *_ in rows]
    attempts: dict[uuid.UUID, list[WebhookAttempt]] = {delivery_id: [] for delivery_id in ids}
    for attempt in session.scalars(
        select(WebhookAttempt)
        .where(WebhookAttempt.delivery_id.in_(ids))
        .order_by(WebhookAttempt.delivery_id, WebhookAttempt.number)
    ):
        attempts[attempt.delivery_id].append(attempt)
    return [
        DeliveryView(delivery, event, endpoint, client_name, attempts[delivery.id])
        for delivery, event, endpoint, client_name in rows
    ]


def _view_query() -> ViewQuery:
    return (
        select(WebhookDelivery, WebhookEvent, WebhookEndpoint, Client.name)
        .join(WebhookEvent, WebhookEvent.id == WebhookDelivery.event_id)
        .join(WebhookEndpoint, WebhookEndpoint.id == WebhookDelivery.endpoint_id)
        .join(Client, Client.id == WebhookEvent.client_id)
    )


def list_job_deliveries(session: Session, job_id: uuid.UUID) -> list[DeliveryView]:
    return _views(
        session,
        _view_query()
        .where(WebhookEvent.job_id == job_id)
        .order_by(WebhookDelivery.created_at, WebhookDelivery.id),
    )


def get_delivery(
    session: Session, delivery_id: uuid.UUID, client_id: uuid.UUID | None
) -> DeliveryView | None:
    """One delivery; with `client_id`, only if it is that client's."""
    query = _view_query().where(WebhookDelivery.id == delivery_id)
    if client_id is not None:
        query = query.where(WebhookEvent.client_id == client_id)
    found = _views(session, query)
    return found[0] if found else None


def list_deliveries_by_status(
    session: Session, status: DeliveryStatus, limit: int, offset: int
) -> list[DeliveryView]:
    return _views(
        session,
        _view_query()
        .where(WebhookDelivery.status == status)
        .order_by(WebhookDelivery.updated_at.desc(), WebhookDelivery.id)
        .limit(limit)
        .offset(offset),
    )


# --- Secrets.


def rotate_secret(
    session: Session, client_id: uuid.UUID, new_secret: str, overlap: timedelta
) -> datetime | None:
    """Make `new_secret` current; the old one keeps signing for `overlap`. Returns
    when the old one stops (None without an overlap)."""
    client = session.get(Client, client_id, with_for_update=True)
    if client is None:
        raise LookupError(client_id)
    expires_at = None
    if overlap > timedelta(0):
        expires_at = session.scalar(select(func.now() + overlap))
    client.webhook_previous_secret = client.webhook_secret if expires_at else None
    client.webhook_previous_secret_expires_at = expires_at
    client.webhook_secret = new_secret
    session.flush()
    return expires_at


def client_id_by_name(session: Session, name: str) -> uuid.UUID | None:
    return session.scalar(select(Client.id).where(Client.name == name))
