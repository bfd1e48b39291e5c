"""What the API returns for webhook deliveries and secrets."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, Field

from pagemill.domain import DeliveryStatus
from pagemill.webhooks.repository import DeliveryView


class WebhookAttemptOut(BaseModel):
    number: int
    started_at: datetime
    destination: str | None = Field(description="The address connected to, after the check.")
    status_code: int | None
    latency_ms: int | None = Field(description="Until the response's headers arrived.")
    error: str | None
    response_body: str | None = Field(description="The first 2 KB of the response.")


class WebhookDeliveryOut(BaseModel):
    id: uuid.UUID
    event_id: uuid.UUID = Field(description="Sent as webhook-id; the same on every attempt.")
    event_type: str
    job_id: uuid.UUID
    url: str
    status: DeliveryStatus
    attempts: int
    next_attempt_at: datetime | None
    last_status_code: int | None
    last_error: str | None
    finished_at: datetime | None
    created_at: datetime
    replay_of: uuid.UUID | None
    endpoint_disabled_at: datetime | None
    attempt_log: list[WebhookAttemptOut]


class WebhookDeliveryListOut(BaseModel):
    deliveries: list[WebhookDeliveryOut]


class OpsWebhookDeliveryOut(WebhookDeliveryOut):
    client_id: uuid.UUID
    client_name: str


class OpsWebhookDeliveryListOut(BaseModel):
    deliveries: list[OpsWebhookDeliveryOut]
    limit: int
    offset: int


class WebhookSecretOut(BaseModel):
    secret: str = Field(description="whsec_...: verify deliveries with it from now on.")
    previous_secret_expires_at: datetime | None = Field(
        description="Until then deliveries carry a second signature, by the previous secret."
    )


def _fields(view: DeliveryView) -> dict[str, object]:
    delivery = view.delivery
    return {
        "id": delivery.id,
        "event_id": view.event.id,
        "event_type": view.event.type,
        "job_id": view.event.job_id,
        "url": view.endpoint.url,
        "status": delivery.status,
        "attempts": delivery.attempts,
        "next_attempt_at": delivery.next_attempt_at
        if delivery.status is DeliveryStatus.pending
        else None,
        "last_status_code": delivery.last_status_code,
        "last_error": delivery.last_error,
        "finished_at": delivery.finished_at,
        "created_at": delivery.created_at,
        "replay_of": delivery.replay_of_id,
        "endpoint_disabled_at": view.endpoint.disabled_at,
        "attempt_log": [
            WebhookAttemptOut(
                number=attempt.number,
                started_at=attempt.started_at,
                destination=attempt.destination,
                status_code=attempt.status_code,
                latency_ms=attempt.latency_ms,
                error=attempt.error,
                response_body=attempt.response_body,
            )
            for attempt in view.attempts
        ],
    }


def delivery_out(view: DeliveryView) -> WebhookDeliveryOut:
    return WebhookDeliveryOut.model_validate(_fields(view))


def ops_delivery_out(view: DeliveryView) -> OpsWebhookDeliveryOut:
    return OpsWebhookDeliveryOut.model_validate(
        {**_fields(view), "client_id": view.event.client_id, "client_name": view.client_name}
    )
