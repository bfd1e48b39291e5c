"""One delivery attempt, from claim to settled outcome, and the retry schedule.

Only 2xx is success. 410 Gone disables the endpoint. Anything else (3xx included:
redirects are not followed) is retried on the schedule in settings, with jitter;
429 and 5xx may ask for a longer wait with Retry-After. A refused destination
or a disabled endpoint ends the delivery at once. Every attempt is logged, whatever
went wrong in it, and counts toward dead.

An attempt ends within its deadline, which is well inside its lease, so an event is
never sent again while an attempt at it is live; and a client has at most its cap of
attempts in flight, so its slow endpoints cannot hold every webhook thread.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy.orm import Session, sessionmaker

from pagemill.domain import DeliveryStatus
from pagemill.settings import Settings
from pagemill.webhooks import repository, sender, signing, ssrf
from pagemill.webhooks.fairness import ClientSlots, retry_when_full_s
from pagemill.webhooks.repository import AttemptRecord, DeliveryTarget
from pagemill.webhooks.urls import InvalidWebhookUrl, validate_webhook_url

log = logging.getLogger(__name__)

# (destination, headers, body, timeout per operation, seconds left for the whole request)
Send = Callable[[ssrf.Destination, dict[str, str], str, float, float], sender.SendResult]
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
        # The check submission made: a URL stored before it existed may fail it.
        validate_webhook_url(target.url)
    except InvalidWebhookUrl as invalid:
        return sender.SendResult(error=f"invalid webhook URL: {invalid.message}"), None, True
    deadline = time.monotonic() + settings.webhook_attempt_deadline_s
    try:
        destination = _resolve_within(
            settings.webhook_attempt_deadline_s, resolve, target, settings
        )
    except ssrf.DestinationRefused as refused:
        return sender.SendResult(error=f"destination refused: {refused}"), None, True
    except ssrf.DestinationUnresolvable as unresolvable:
        return sender.SendResult(error=str(unresolvable)), None, False
    # Signed now, per attempt: the timestamp is when this attempt was sent.
    headers = signing.headers(
        target.signing_secrets, str(target.event_id), int(time.time()), target.body
    )
    remaining_s = max(0.0, deadline - time.monotonic())
    result = send(destination, headers, target.body, settings.webhook_timeout_s, remaining_s)
    return result, destination.display, False


def _resolve_within(
    seconds: float, resolve: Resolve, target: DeliveryTarget, settings: Settings
) -> ssrf.Destination:
    """The lookup, bounded by the attempt deadline. getaddrinfo cannot be cancelled, so it
    runs on a daemon thread that is left to finish on its own if it overruns."""
    outcome: dict[str, Any] = {}

    def lookup() -> None:
        try:
            outcome["destination"] = resolve(
                target.url, settings.webhook_allowed_hosts, settings.webhook_allowed_cidrs
            )
        except BaseException as error:  # handed to the attempt's thread as is
            outcome["error"] = error

    thread = threading.Thread(target=lookup, name="pagemill-webhook-dns", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        host = httpx.URL(target.url).host
        raise ssrf.DestinationUnresolvable(
            f"{host} did not resolve within the {seconds:g} s attempt deadline"
        )
    if "error" in outcome:
        raise outcome["error"]
    destination: ssrf.Destination = outcome["destination"]
    return destination


def attempt_delivery(
    sessions: sessionmaker[Session],
    settings: Settings,
    delivery_id: uuid.UUID,
    send: Send = sender.send,
    resolve: Resolve = ssrf.resolve_destination,
    slots: ClientSlots | None = None,
) -> AttemptRun:
    """Make one attempt if the delivery is due; a duplicate or early message does nothing.
    With `slots`, only while its client is under its cap of attempts in flight; when it
    is not, the delivery is left unclaimed and its message comes back a little later."""
    if slots is None:
        return _attempt(sessions, settings, delivery_id, send, resolve)
    with sessions.begin() as session:
        client_id = repository.due_delivery_client(session, delivery_id)
    if client_id is None:
        return AttemptRun(delivery_id)
    with slots.held(client_id) as held:
        if held:
            return _attempt(sessions, settings, delivery_id, send, resolve)
    with sessions.begin() as session:
        # Its message is on its way again: the reaper need not take it for lost.
        repository.mark_published(session, delivery_id)
    return AttemptRun(delivery_id, publish_in_s=retry_when_full_s(settings))


def _attempt(
    sessions: sessionmaker[Session],
    settings: Settings,
    delivery_id: uuid.UUID,
    send: Send,
    resolve: Resolve,
) -> AttemptRun:
    lease = timedelta(seconds=settings.webhook_attempt_lease_s)
    max_attempts = len(settings.webhook_retry_schedule_s) + 1
    with sessions.begin() as session:
        if repository.give_up_exhausted(session, delivery_id, max_attempts):
            log.warning("webhook %s: every attempt was used, the last one lost", delivery_id)
            return AttemptRun(delivery_id, status=DeliveryStatus.dead)
        target = repository.claim_delivery(session, delivery_id, lease)
    if target is None:
        return AttemptRun(delivery_id)
    started_at = datetime.now(UTC)
    try:
        result, destination, final = _try(target, settings, send, resolve)
    except Exception as error:
        # Whatever broke, this attempt is over: log it as the attempt's outcome so it
        # counts toward dead, rather than leave the delivery claimed and unrecorded.
        log.exception("webhook %s attempt %d failed unexpectedly", delivery_id, target.attempt)
        result = sender.SendResult(error=f"{type(error).__name__}: {error}"[:1000])
        destination, final = None, False
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
