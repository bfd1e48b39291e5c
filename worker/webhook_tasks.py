"""The webhook delivery task: one attempt per message, on its own queue.

The attempt logic lives in pagemill.webhooks.service; this takes an id, runs one
attempt, and publishes the next one when it is due soon enough for a delayed
message (later ones are published by the reaper's sweep when due).
"""

from __future__ import annotations

import logging
import uuid

from celery import Task
from sqlalchemy.exc import DBAPIError

from pagemill.db.session import session_factory
from pagemill.queue import WEBHOOK_DELIVERY_TASK, publish_webhook_delivery
from pagemill.settings import get_settings
from pagemill.webhooks.fairness import slots_for
from pagemill.webhooks.service import attempt_delivery
from worker.celery_app import app
from worker.retries import outage_backoff_s

log = logging.getLogger(__name__)

OUTAGE_RETRIES = 5
# An attempt ends by its own deadline (threads pools have no time limits at all);
# these limits only catch a stuck prefork child, between the deadline and the lease,
# so a killed attempt is never overlapped by the next one.
_DEADLINE_S = get_settings().webhook_attempt_deadline_s
_LEASE_S = get_settings().webhook_attempt_lease_s
TIME_LIMIT_S = _DEADLINE_S + (_LEASE_S - _DEADLINE_S) / 2
SOFT_TIME_LIMIT_S = _DEADLINE_S + (_LEASE_S - _DEADLINE_S) / 4


@app.task(
    name=WEBHOOK_DELIVERY_TASK,
    bind=True,
    max_retries=OUTAGE_RETRIES,
    time_limit=TIME_LIMIT_S,
    soft_time_limit=SOFT_TIME_LIMIT_S,
)
def deliver_webhook(task: Task, delivery_id: str) -> None:
    try:
        settings = get_settings()
        run = attempt_delivery(
            session_factory(), settings, uuid.UUID(delivery_id), slots=slots_for(settings)
        )
    except (DBAPIError, ConnectionError) as error:
        log.warning("webhook delivery %s: outage, retrying: %s", delivery_id, error)
        raise task.retry(exc=error, countdown=outage_backoff_s(task.request.retries)) from error
    if run.publish_in_s is not None:
        publish_webhook_delivery(delivery_id, countdown_s=run.publish_in_s)
