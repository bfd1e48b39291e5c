"""Webhook deliveries: a job's delivery log, replay, secret rotation, and the ops view."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import AdminDep, ClientDep, OffsetQuery, SessionDep, SettingsDep
from api.errors import ApiError
from pagemill.domain import DeliveryStatus
from pagemill.jobs import repository as jobs_repository
from pagemill.webhooks import outbox, repository
from pagemill.webhooks.schemas import (
    OpsWebhookDeliveryListOut,
    WebhookDeliveryListOut,
    WebhookDeliveryOut,
    WebhookSecretOut,
    delivery_out,
    ops_delivery_out,
)

router = APIRouter(tags=["webhooks"])

MAX_SECRET_OVERLAP_S = 7 * 24 * 3600


@router.get("/v1/jobs/{job_id}/webhook-deliveries", response_model=WebhookDeliveryListOut)
def list_job_deliveries(
    job_id: uuid.UUID, client: ClientDep, session: SessionDep
) -> WebhookDeliveryListOut:
    """Every delivery of this job's events, replays included, with every attempt."""
    job = jobs_repository.get_client_job(session, client.id, job_id)
    if job is None:
        raise ApiError(404, "job_not_found", "There is no job with this id.")
    views = repository.list_job_deliveries(session, job.id)
    return WebhookDeliveryListOut(deliveries=[delivery_out(view) for view in views])


@router.post(
    "/v1/webhook-deliveries/{delivery_id}/replay",
    status_code=202,
    response_model=WebhookDeliveryOut,
)
def replay_delivery(
    delivery_id: uuid.UUID, client: ClientDep, session: SessionDep
) -> WebhookDeliveryOut:
    """Send the event again: same webhook-id and body, new timestamp and signature.
    Re-enables an endpoint that a 410 disabled. Admin keys may replay any delivery."""
    replayed = outbox.replay_delivery(session, delivery_id, None if client.is_admin else client.id)
    if replayed is None:
        raise ApiError(404, "delivery_not_found", "There is no webhook delivery with this id.")
    return delivery_out(replayed)


@router.post("/v1/webhooks/secret/rotate", response_model=WebhookSecretOut)
def rotate_secret(
    client: ClientDep,
    session: SessionDep,
    settings: SettingsDep,
    overlap_s: Annotated[
        int | None,
        Query(
            ge=0,
            le=MAX_SECRET_OVERLAP_S,
            description="How long the previous secret keeps signing too; default "
            "PAGEMILL_WEBHOOK_SECRET_OVERLAP_S, 0 to drop it at once.",
        ),
    ] = None,
) -> WebhookSecretOut:
    """A new signing secret, returned once here. Until the previous one expires,
    deliveries carry two signatures, so receivers can switch at their own pace."""
    overlap = timedelta(
        seconds=settings.webhook_secret_overlap_s if overlap_s is None else overlap_s
    )
    secret, previous_expires_at = outbox.rotate_secret(session, client.id, overlap)
    session.commit()
    return WebhookSecretOut(secret=secret, previous_secret_expires_at=previous_expires_at)


@router.get("/v1/ops/webhook-deliveries", response_model=OpsWebhookDeliveryListOut)
def ops_deliveries(
    _admin: AdminDep,
    session: SessionDep,
    status: DeliveryStatus = DeliveryStatus.dead,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: OffsetQuery = 0,
) -> OpsWebhookDeliveryListOut:
    """For operators: deliveries of every client by status, dead ones by default,
    most recently changed first."""
    views = repository.list_deliveries_by_status(session, status, limit, offset)
    return OpsWebhookDeliveryListOut(
        deliveries=[ops_delivery_out(view) for view in views], limit=limit, offset=offset
    )
