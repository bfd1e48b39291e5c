"""Webhook tables: endpoints, events (the outbox), deliveries and their attempts.

An event is written in the transaction that makes its job terminal, so it exists
exactly when the transition does. A delivery is one event on its way to one URL;
a replay is a new delivery of the same event (same `webhook-id`, same body).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    DateTime,
    Enum,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.orm import Mapped, mapped_column

from pagemill.db.base import Base, TimestampMixin, new_uuid


class DeliveryStatus(StrEnum):
    pending = "pending"  # waiting for its next attempt (or in one)
    succeeded = "succeeded"  # a 2xx answer
    dead = "dead"  # retries used up, refused destination, or endpoint gone: for ops


class WebhookEndpoint(TimestampMixin, Base):
    """A client's callback URL. A 410 answer disables it until a replay re-enables it."""

    __tablename__ = "webhook_endpoints"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_uuid)
    client_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("clients.id", ondelete="CASCADE"), index=True
    )
    url: Mapped[str] = mapped_column(Text)
    disabled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    disabled_reason: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (UniqueConstraint("client_id", "url"),)


class WebhookEvent(Base):
    """What happened, as the exact bytes every delivery and replay sends."""

    __tablename__ = "webhook_events"

    # Sent as `webhook-id`: the receiver's key for discarding duplicates.
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_uuid)
    client_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("clients.id", ondelete="CASCADE"), index=True
    )
    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    type: Mapped[str] = mapped_column(String(64))  # job.succeeded, job.failed, job.cancelled
    # Text, not JSONB: the signature covers these bytes, so they must never be re-encoded.
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())

    # A job becomes terminal once; this makes a second event for it impossible too.
    __table_args__ = (UniqueConstraint("job_id", "type"),)


class WebhookDelivery(TimestampMixin, Base):
    __tablename__ = "webhook_deliveries"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_uuid)
    event_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("webhook_events.id", ondelete="CASCADE"), index=True
    )
    endpoint_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("webhook_endpoints.id", ondelete="CASCADE"), index=True
    )
    replay_of_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("webhook_deliveries.id", ondelete="SET NULL")
    )
    status: Mapped[DeliveryStatus] = mapped_column(
        Enum(
            DeliveryStatus,
            name="webhook_delivery_status",
            values_callable=lambda members: [member.value for member in members],
            validate_strings=True,
        ),
        default=DeliveryStatus.pending,
    )
    # Incremented by every claim; the write that settles an attempt must carry its number.
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # When the next attempt is due; while an attempt runs, when its lease runs out.
    next_attempt_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # When a message for the due attempt was last published. None: none was (not yet, or
    # the wait is too long for a delayed message), so the reaper publishes it when due.
    published_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index(None, "status", "next_attempt_at"),
        CheckConstraint("attempts >= 0", name="attempts_not_negative"),
    )


class WebhookAttempt(Base):
    """One try at one delivery, kept for the caller and for ops."""

    __tablename__ = "webhook_attempts"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    delivery_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("webhook_deliveries.id", ondelete="CASCADE"), index=True
    )
    number: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # The address actually connected to (after the SSRF check), e.g. "203.0.113.7:443".
    destination: Mapped[str | None] = mapped_column(String(100))
    status_code: Mapped[int | None] = mapped_column(Integer)
    latency_ms: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    response_body: Mapped[str | None] = mapped_column(Text)  # the first 2 KB

    __table_args__ = (UniqueConstraint("delivery_id", "number"),)
