"""One delivery attempt, from claim to settled outcome, and the retry schedule.

Only 2xx is success. 410 Gone disables the endpoint. Anything else (3xx included:
redirects are not followed) is retried on the schedule in settings, with jitter;
429 and 5xx may ask for a longer wait with Retry-After. A refused destination
or a disabled endpoint ends the delivery at once. Every attempt is logged.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from pagemill.settings import Settings
from pagemill.webhooks import repository, sender, signing, ssrf
from pagemill.webhooks.models import DeliveryStatus
from pagemill.webhooks.repository import AttemptRecord, DeliveryTarget

log = logging.getLogger(__name__)

Send = Callable[[ssrf.Destination, dict[str, str], str, float], sender.SendResult]
Resolve = Callable[..., ssrf.Destination]


@dataclass(frozen=True)
class Decision:
    status: DeliveryStatus
    retry_in_s: float | None = None
    disable_endpoint: bool = False
    last_error: str | None = None


def decide(
    result: sender.SendResult,
    attempt: int,
    settings: Settings,
    final: bool = False,
    rng: Callable[[], float] = random.random,
) -> Decision:
    """What an attempt's result means for its delivery. `final`: nothing will change
    on a later attempt (the destination was refused, or the endpoint is disabled)."""
    if result.succeeded:
        return Decision(DeliveryStatus.succeeded)
    if final:
        return Decision(DeliveryStatus.dead, last_error=result.error)
    if result.status_code == 410:
        return Decision(
            DeliveryStatus.dead,
            disable_endpoint=True,
            last_error="answered 410 Gone: the endpoint is disabled until a replay",
        )
    schedule = settings.webhook_retry_schedule_s
    if attempt > len(schedule):
        return Decision(
            DeliveryStatus.dead, last_error=f"gave up after {attempt} attempts: {result.error}"
        )
    jitter = settings.webhook_retry_jitter * (2 * rng() - 1)
    delay = schedule[attempt - 1] * (1 + jitter)
    if result.retry_after_s is not None:
        delay = max(delay, min(result.retry_after_s, settings.webhook_max_retry_after_s))
    return Decision(DeliveryStatus.pending, retry_in_s=delay, last_error=result.error)


@dataclass(frozen=True)
class AttemptRun:
    """What the task does next: publish a delayed message, or nothing."""

    delivery_id: uuid.UUID
    attempt: int | None = None
    status: DeliveryStatus | None = None
    publish_in_s: float | None = None


def _try(
    target: DeliveryTarget, settings: Settings, send: Send, resolve: Resolve
) -> tuple[sender.SendResult, str | None, bool]:
    """(result, address connected to, final)."""
    if target.endpoint_disabled_reason is not None:
        error = f"endpoint disabled: {target.endpoint_disabled_reason}"
        return sender.SendResult(error=error), None, True
    try:
        destination = resolve(
            target.url, settings.webhook_allowed_hosts, settings.webhook_allowed_cidrs
        )
    except ssrf.DestinationRefused as refused:
        return sender.SendResult(error=f"destination refused: {refused}"), None, True
    except ssrf.DestinationUnresolvable as unresolvable:
        return sender.SendResult(error=str(unresolvable)), None, False
    # Signed now, per attempt: the timestamp is when this attempt was sent.
    headers = signing.headers(
        target.signing_secrets, str(target.event_id), int(time.time()), target.body
    )
    result = send(destination, headers, target.body, settings.webhook_timeout_s)
    return result, destination.display, False


def attempt_delivery(
    sessions: sessionmaker[Session],
    settings: Settings,
    delivery_id: uuid.UUID,
    send: Send = sender.send,
    resolve: Resolve = ssrf.resolve_destination,
) -> AttemptRun:
    """Make one attempt if the delivery is due; a duplicate or early message does nothing."""
    lease = timedelta(seconds=settings.webhook_attempt_lease_s)
    with sessions.begin() as session:
        target = repository.claim_delivery(session, delivery_id, lease)
    if target is None:
        return AttemptRun(delivery_id)
    started_at = datetime.now(UTC)
    result, destination, final = _try(target, settings, send, resolve)
    decision = decide(result, target.attempt, settings, final=final)
    record = AttemptRecord(
        started_at=started_at,
        destination=destination,
        status_code=result.status_code,
        latency_ms=result.latency_ms,
        error=result.error,
        response_body=result.response_body,
    )
    delay = decision.retry_in_s
    message_follows = delay is not None and delay <= settings.webhook_max_countdown_s
    with sessions.begin() as session:
        repository.record_attempt(session, delivery_id, target.attempt, record)
        settled = repository.settle_attempt(
            session,
            delivery_id,
            target.attempt,
            decision.status,
            record,
            last_error=decision.last_error,
            retry_in=timedelta(seconds=delay) if delay is not None else None,
            message_follows=message_follows,
        )
        if settled and decision.disable_endpoint:
            repository.disable_endpoint(session, target.endpoint_id, "answered 410 Gone")
    log.info(
        "webhook %s %s attempt %d to %s: %s",
        target.event_type,
        delivery_id,
        target.attempt,
        destination or target.url,
        result.status_code or result.error,
    )
    if not settled:
        # The lease ran out mid-attempt and another attempt took over: it decides.
        return AttemptRun(delivery_id, target.attempt)
    return AttemptRun(
        delivery_id,
        target.attempt,
        decision.status,
        publish_in_s=delay if message_follows else None,
    )
