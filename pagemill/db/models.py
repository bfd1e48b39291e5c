"""Every table, in one module. Postgres is the record of truth; Redis messages carry
these ids only."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Enum,
    Float,
    ForeignKey,
    Index,
    Integer,
    Numeric,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from pagemill.db.base import Base, TimestampMixin, new_uuid
from pagemill.domain import DeliveryStatus, JobStatus, LicenseUse, PageStatus, SourceKind


def _enum(enum_cls: type, name: str) -> Enum:
    # Stored by value, so the database reads "non_commercial", not the Python member name.
    return Enum(
        enum_cls,
        name=name,
        values_callable=lambda members: [member.value for member in members],
        validate_strings=True,
    )


class Client(TimestampMixin, Base):
    """A calling service. Its API key is stored only as a SHA-256 digest."""

    __tablename__ = "clients"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_uuid)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    # The key's public prefix finds the row; the digest of the whole key proves it.
    api_key_prefix: Mapped[str] = mapped_column(String(32), unique=True)
    api_key_sha256: Mapped[str] = mapped_column(String(64))
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False, server_default="false")
    default_license_use: Mapped[LicenseUse] = mapped_column(
        _enum(LicenseUse, "license_use"), default=LicenseUse.non_commercial
    )
    disabled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Signs webhooks (Standard Webhooks, `whsec_...`). Kept readable, unlike the API key:
    # an HMAC needs the secret itself. During a rotation the previous one signs too.
    # Issued with the client (pagemill.clients.repository), as its API key is.
    webhook_secret: Mapped[str] = mapped_column(String(100))
    webhook_previous_secret: Mapped[str | None] = mapped_column(String(100))
    webhook_previous_secret_expires_at: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True)
    )
    # Overrides of the deployment's defaults (PAGEMILL_DEFAULT_RETENTION_DAYS and
    # PAGEMILL_DEFAULT_PAGE_QUOTA_DAY / _MONTH); None takes the default.
    retention_days: Mapped[int | None] = mapped_column(Integer)
    page_quota_day: Mapped[int | None] = mapped_column(Integer)
    page_quota_month: Mapped[int | None] = mapped_column(Integer)

    __table_args__ = (
        CheckConstraint("retention_days > 0", name="retention_days_positive"),
        CheckConstraint(
            "page_quota_day >= 0 AND page_quota_month >= 0", name="page_quotas_not_negative"
        ),
    )


class Job(TimestampMixin, Base):
    __tablename__ = "jobs"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_uuid)
    client_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("clients.id"), index=True)
    status: Mapped[JobStatus] = mapped_column(
        _enum(JobStatus, "job_status"), default=JobStatus.queued, index=True
    )
    license_use: Mapped[LicenseUse] = mapped_column(_enum(LicenseUse, "license_use"))
    engine: Mapped[str] = mapped_column(String(32))
    webhook_url: Mapped[str | None] = mapped_column(Text)
    caller_metadata: Mapped[dict[str, Any]] = mapped_column(
        "metadata", JSONB, default=dict, server_default="{}"
    )
    source_filename: Mapped[str | None] = mapped_column(String(500))
    # A document given by URL (https or s3://) is fetched by the worker's prepare; until
    # then the source's facts below, and the pages they select, are unknown (None).
    source_url: Mapped[str | None] = mapped_column(Text)
    source_kind: Mapped[SourceKind | None] = mapped_column(_enum(SourceKind, "source_kind"))
    source_bytes: Mapped[int | None] = mapped_column(BigInteger)
    source_sha256: Mapped[str | None] = mapped_column(String(64))
    # The PDF opened without a password, but its owner withheld the permission to copy
    # or extract its text; reported to the caller, who decides what that means for them.
    source_extraction_restricted: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default="false"
    )
    document_pages: Mapped[int | None] = mapped_column(Integer)
    # The caller's page selection as given ("1-3,7"); None means every page.
    page_selection: Mapped[str | None] = mapped_column(String(200))
    pages_total: Mapped[int | None] = mapped_column(Integer)
    batch_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("batches.id"), index=True)
    # The position of the job's document in its batch, from 0, as the caller sent them.
    batch_index: Mapped[int | None] = mapped_column(Integer)
    error_code: Mapped[str | None] = mapped_column(String(64))
    error_message: Mapped[str | None] = mapped_column(Text)
    # Claims of the prepare stage: the fencing token, and capped so that nothing retries
    # forever. Failures of the renderer itself (a poison document) have a lower cap.
    # Both are counted here, not in messages, which a crash can lose.
    prepare_attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    prepare_failures: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    prepare_lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Starts of the finalize stage (a message delivered, not its outage retries), capped
    # so that a finalize killed at the time limit, or failing every time, ends the job.
    finalize_attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Held by the finalize start under way, through its outage retries: until it runs out,
    # another delivery of the message (a duplicate, or the reaper's) counts no start, so
    # copies of one start cannot use up the cap while it waits out an outage.
    finalize_lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The price told to the caller at submit, and the ceiling the caller set.
    quote_usd: Mapped[Decimal | None] = mapped_column(Numeric(14, 8))
    max_cost_usd: Mapped[Decimal | None] = mapped_column(Numeric(14, 8))
    # Running headers, footers and page numbers in document.md: "separate" (moved to
    # manifest.json), "inline" or "drop" (pagemill.quality.furniture.FurnitureMode).
    furniture: Mapped[str] = mapped_column(
        String(16), default="separate", server_default="separate"
    )
    # Data read from the document beside its Markdown: "invoice" (pagemill.invoices), which
    # finalize writes to invoice.json; None: Markdown only.
    extract: Mapped[str | None] = mapped_column(String(16))
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Set when a purge begins (pagemill.jobs.purge): from then on no result is served and
    # a worker that stores an object afterwards removes it again. Status `purged` follows
    # once the objects are gone.
    purged_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # What makes two jobs' results the same (pagemill.jobs.result_cache); None: not cacheable.
    cache_key: Mapped[str | None] = mapped_column(String(64))
    # The earlier job whose stored result this one reuses: no engine ran for it.
    cached_from: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="SET NULL")
    )

    __table_args__ = (
        Index(None, "client_id", "cache_key"),
        # The quota sums a client's pages since the start of the day or month.
        Index(None, "client_id", "created_at"),
        # The reaper's retention pass reads only jobs not purged yet.
        Index(None, "finished_at", postgresql_where=text("purged_at IS NULL")),
        CheckConstraint("pages_total > 0", name="pages_total_positive"),
        CheckConstraint("furniture IN ('separate', 'inline', 'drop')", name="furniture_known"),
        CheckConstraint("extract IN ('invoice')", name="extract_known"),
        CheckConstraint(
            "source_url IS NOT NULL OR source_sha256 IS NOT NULL",
            name="source_uploaded_or_by_url",
        ),
        UniqueConstraint("batch_id", "batch_index"),
    )


class Batch(TimestampMixin, Base):
    """Documents submitted together: one job each (jobs.batch_id), one event at the end."""

    __tablename__ = "batches"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_uuid)
    client_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("clients.id"), index=True)
    documents: Mapped[int] = mapped_column(Integer)
    # Where `batch.completed` goes; each job's own events go to the job's webhook_url.
    webhook_url: Mapped[str | None] = mapped_column(Text)
    # Set, under the batch row's lock, by the transaction that ends its last job: the
    # one that records `batch.completed` (pagemill.jobs.batch_completion).
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (CheckConstraint("documents > 0", name="documents_positive"),)


class IdempotencyKey(Base):
    """One `Idempotency-Key` of one client: the first request's fingerprint and answer."""

    __tablename__ = "idempotency_keys"

    client_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("clients.id", ondelete="CASCADE"), primary_key=True
    )
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    request_sha256: Mapped[str] = mapped_column(String(64))
    job_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    response_status: Mapped[int | None] = mapped_column(Integer)
    response_body: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), index=True
    )


class Page(TimestampMixin, Base):
    __tablename__ = "pages"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    number: Mapped[int] = mapped_column(Integer)  # 1-based page number in the source
    status: Mapped[PageStatus] = mapped_column(
        _enum(PageStatus, "page_status"), default=PageStatus.queued, index=True
    )
    # Incremented by every claim; a finishing write must carry the attempt it claimed,
    # so a worker that stalled past its lease cannot overwrite newer work.
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Engine errors on this page; capped lower than attempts, which outages also use up.
    engine_failures: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    # What prepare saw.
    width_pt: Mapped[float | None] = mapped_column(Float)
    height_pt: Mapped[float | None] = mapped_column(Float)
    image_width_px: Mapped[int | None] = mapped_column(Integer)
    image_height_px: Mapped[int | None] = mapped_column(Integer)
    image_dpi: Mapped[int | None] = mapped_column(Integer)
    text_chars: Mapped[int | None] = mapped_column(Integer)
    image_coverage: Mapped[float | None] = mapped_column(Float)
    # Everything prepare measured (worker.engines.base.PageFacts), kept for re-routing.
    facts: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict, server_default="{}")
    render_seconds: Mapped[float | None] = mapped_column(Float)

    # What ran, and why.
    engine: Mapped[str | None] = mapped_column(String(32))
    engine_reason: Mapped[str | None] = mapped_column(Text)
    device_kind: Mapped[str | None] = mapped_column(String(64))
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    wall_seconds: Mapped[float | None] = mapped_column(Float)
    device_seconds: Mapped[float | None] = mapped_column(Float)
    cost_usd: Mapped[Decimal | None] = mapped_column(Numeric(14, 8))
    output_chars: Mapped[int | None] = mapped_column(Integer)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    output_tokens: Mapped[int | None] = mapped_column(Integer)
    finish_reason: Mapped[str | None] = mapped_column(String(32))
    engine_details: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict, server_default="{}")
    error: Mapped[str | None] = mapped_column(Text)
    # The page's Markdown, kept from its result until the job ends, so finalize
    # assembles the document from the rows it reads anyway rather than fetching every
    # page from S3 again (the page's object in S3 is what the API serves). Cleared when
    # the job ends; None also for a page whose Markdown could not be kept here
    # (worker.stages.ocr), which finalize reads from S3. Loaded only when asked for.
    staged_markdown: Mapped[str | None] = mapped_column(Text, deferred=True)
    # The attempt whose objects in S3 (pagemill.storage.JobKeys.page_markdown) are the
    # page's result, written with it; None for a page without one, and for a page read
    # before results were kept by attempt (its objects have no attempt in their keys).
    result_attempt: Mapped[int | None] = mapped_column(Integer)

    # Where and under which licence the page was processed. `license_use` is the job's,
    # copied so the database itself can refuse a commercial page on a basis that
    # does not permit it (see the check constraint below).
    worker_id: Mapped[str | None] = mapped_column(String(200), index=True)
    license_use: Mapped[LicenseUse | None] = mapped_column(_enum(LicenseUse, "license_use"))
    model: Mapped[str | None] = mapped_column(String(100))
    model_license: Mapped[str | None] = mapped_column(String(64))
    deployment_license_reference: Mapped[str | None] = mapped_column(String(200))
    basis_permits_commercial: Mapped[bool | None] = mapped_column(Boolean)
    price_usd_per_hour: Mapped[Decimal | None] = mapped_column(Numeric(12, 6))

    # GPU engine measurements (vLLM's RequestOutput.metrics and speculative decoding).
    queue_seconds: Mapped[float | None] = mapped_column(Float)
    prefill_seconds: Mapped[float | None] = mapped_column(Float)
    decode_seconds: Mapped[float | None] = mapped_column(Float)
    spec_steps: Mapped[int | None] = mapped_column(Integer)
    spec_draft_tokens: Mapped[int | None] = mapped_column(Integer)
    spec_accepted_tokens: Mapped[int | None] = mapped_column(Integer)
    repetition_retried: Mapped[bool | None] = mapped_column(Boolean)

    # Output quality (pagemill.quality): every check's result, the combined score,
    # and the verdict after at most one repair: ok, repaired or degraded.
    blank: Mapped[bool | None] = mapped_column(Boolean)
    quality_checks: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB)
    quality_score: Mapped[float | None] = mapped_column(Float)
    verdict: Mapped[str | None] = mapped_column(String(16))
    repair: Mapped[str | None] = mapped_column(String(64))
    # The page's running headers, footers and page numbers, each with where the job's
    # furniture mode left it; written by finalize.
    furniture: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB)

    __table_args__ = (
        CheckConstraint(
            "license_use IS DISTINCT FROM 'commercial' OR basis_permits_commercial IS NOT FALSE",
            name="commercial_use_needs_commercial_basis",
        ),
        UniqueConstraint("job_id", "number"),
        CheckConstraint("number > 0", name="number_positive"),
        CheckConstraint("attempts >= 0", name="attempts_not_negative"),
    )


class Worker(Base):
    """A worker process as it registered: what it runs, under which licence, at what
    price, and how busy it has been. Rows of dead workers stay for the accounts."""

    __tablename__ = "workers"

    id: Mapped[str] = mapped_column(String(200), primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    queues: Mapped[list[str]] = mapped_column(JSONB, default=list)
    device_kind: Mapped[str] = mapped_column(String(64))
    device_count: Mapped[int] = mapped_column(Integer)
    price_usd_per_hour: Mapped[Decimal] = mapped_column(Numeric(12, 6))
    engine: Mapped[str] = mapped_column(String(32))
    model: Mapped[str] = mapped_column(String(100))
    model_license: Mapped[str] = mapped_column(String(64))
    model_permits_commercial: Mapped[bool] = mapped_column(Boolean)
    deployment_license_reference: Mapped[str | None] = mapped_column(String(200))
    versions: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    heartbeat_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), index=True
    )
    stopped_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Device seconds charged to pages, and pages finished, by this worker.
    busy_seconds: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    pages_done: Mapped[int] = mapped_column(Integer, default=0, server_default="0")

    @property
    def permits_commercial(self) -> bool:
        return self.model_permits_commercial or self.deployment_license_reference is not None


# --- Webhooks: endpoints, events (the outbox), deliveries and their attempts.
# An event is written in the transaction that makes its job terminal, so it exists
# exactly when the transition does. A delivery is one event on its way to one URL;
# a replay is a new delivery of the same event (same `webhook-id`, same body).


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
        _enum(DeliveryStatus, "webhook_delivery_status"), default=DeliveryStatus.pending
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
