"""The Celery application's configuration and the publishing side of the queues.

The API publishes by task name, so it never imports worker code (or models).
Messages carry ids only; Postgres holds everything else.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Collection, Iterable, Sequence
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

import redis
from celery import Celery
from celery.signals import before_task_publish

from pagemill import redis_transport
from pagemill.domain import LicenseUse, QueuedPage, Stage
from pagemill.engines.catalog import ocr_stage
from pagemill.settings import Settings, get_settings

log = logging.getLogger(__name__)

PREPARE_TASK = "pagemill.prepare"
OCR_TASK = "pagemill.ocr_page"
FINALIZE_TASK = "pagemill.finalize"
WEBHOOK_DELIVERY_TASK = "pagemill.webhooks.deliver"
# Its own queue: slow or dead receivers must never hold up pages.
WEBHOOKS_QUEUE = "webhooks"
# Header with the publisher's wall clock (epoch seconds): Celery's messages carry no
# time of their own, and /metrics reports the age of the oldest one waiting per queue.
PUBLISHED_AT_HEADER = "pagemill_published_at"


@before_task_publish.connect
def _stamp_published_at(headers: dict[str, Any] | None = None, **_: Any) -> None:
    # Retries and republished work are stamped anew: their age counts from then.
    if headers is not None:
        headers[PUBLISHED_AT_HEADER] = time.time()


def make_celery(settings: Settings) -> Celery:
    app = Celery("pagemill", broker=settings.broker_url)
    transport_options = {
        # Redis redelivers unacknowledged messages after this; tasks stay below it.
        "visibility_timeout": settings.broker_visibility_timeout_s,
    }
    if urlsplit(settings.broker_url).scheme in ("redis", "rediss"):
        app.conf.broker_transport = redis_transport.TRANSPORT
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        # Ack after the task, so a crash mid-task leaves the message to be redelivered;
        # a child killed by the OOM killer or SIGKILL counts as a crash too.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        # Pages take seconds; prefetching more than one starves other workers.
        worker_prefetch_multiplier=1,
        broker_transport_options=transport_options,
        broker_connection_retry_on_startup=True,
        task_time_limit=settings.task_time_limit_s,
        # The soft limit leaves the cleanup time to record why a page stopped and what it
        # cost; a page stuck in C code past that is killed, and the worker's main process
        # records it instead (worker.tasks).
        task_soft_time_limit=settings.task_soft_time_limit_s,
        task_routes={
            PREPARE_TASK: {"queue": settings.queue(Stage.prepare)},
            OCR_TASK: {"queue": settings.queue(Stage.ocr)},
            FINALIZE_TASK: {"queue": settings.queue(Stage.finalize)},
            WEBHOOK_DELIVERY_TASK: {"queue": settings.queue(WEBHOOKS_QUEUE)},
        },
        task_default_queue=settings.queue(Stage.prepare),
        worker_hijack_root_logger=False,
    )
    return app


@lru_cache(maxsize=1)
def get_celery() -> Celery:
    return make_celery(get_settings())


def _send(
    task: str,
    args: list[Any],
    queue: str | None = None,
    countdown_s: float | None = None,
    producer: Any = None,
) -> None:
    """Celery's send_task, less two things it does again on every publish: declaring the
    queue, which records an exchange binding that Celery's anonymous exchange (how it
    publishes to a direct queue: straight to the queue's list) never reads, and the
    repr of the arguments, here made directly (the same text for these lists of ids and
    strings). Together they were a third of a publish's CPU: 208 to 221 against 141 to
    146 us an OCR message, its pending marker included (in one process, three rounds of
    2,400 messages in batches of 8)."""
    get_celery().send_task(
        task,
        args=args,
        queue=queue,
        countdown=countdown_s,
        producer=producer,
        declare=[],
        argsrepr=repr(args),
        kwargsrepr="{}",
    )


def publish_prepare(job_id: str) -> None:
    _send(PREPARE_TASK, [job_id])


def publish_ocr(
    page_id: int,
    engine: str | None = None,
    license_use: LicenseUse | None = None,
    countdown_s: float | None = None,
) -> None:
    settings = get_settings()
    queue = settings.queue(ocr_stage(engine, license_use))
    _send(OCR_TASK, [page_id], queue, countdown_s)
    # Set after the publish: a marker with no message would hold the reaper off a lost page.
    _mark_pending([page_id])


def publish_ocr_pages(pages: Sequence[QueuedPage]) -> None:
    """publish_ocr for many pages, at once: their messages go to Redis in one round
    trip (kombu's producer batch), then their pending markers in another."""
    if not pages:
        return
    settings = get_settings()
    with get_celery().producer_or_acquire() as producer, producer.batch():
        for page in pages:
            queue = settings.queue(ocr_stage(page.engine, page.license_use))
            _send(OCR_TASK, [page.page_id], queue, producer=producer)
    _mark_pending([page.page_id for page in pages])


def _mark_pending(page_ids: Sequence[int]) -> None:
    expires_s = get_settings().broker_visibility_timeout_s
    try:
        pipeline = _markers().pipeline(transaction=False)
        for page_id in page_ids:
            pipeline.set(_pending_key(page_id), 1, ex=expires_s)
        pipeline.execute()
    except redis.RedisError as error:
        log.warning("pages %s: published, but not marked pending: %s", list(page_ids), error)


# --- Pending OCR messages. The reaper republishes a page only when no message for it
# is pending, so a page that waits (a long backlog, or a queue nobody consumes) is not
# published again every stale period. A marker is set when a message is published and
# dropped when a worker starts on it; a message lost with the broker loses its marker
# too. It expires with the broker's visibility timeout, the longest a message can sit
# reserved by a worker that died before starting it, before Redis hands it out again.


@lru_cache(maxsize=1)
def _markers() -> redis.Redis:
    # redis-py drops a pool's connections in a forked child, so one client per process.
    return redis.Redis.from_url(get_settings().broker_url)


def _pending_key(page_id: int) -> str:
    return f"{get_settings().queue_prefix}ocr-pending:{page_id}"


def ocr_message_taken(page_id: int) -> None:
    try:
        _markers().delete(_pending_key(page_id))
    except redis.RedisError as error:
        # The marker expires on its own; until then the reaper leaves this page alone.
        log.warning("page %s: could not clear its pending marker: %s", page_id, error)


def pages_with_pending_message(page_ids: Collection[int]) -> set[int]:
    if not page_ids:
        return set()
    ordered = list(page_ids)
    found: list[Any] = _markers().mget([_pending_key(page_id) for page_id in ordered])  # type: ignore[assignment]
    return {page_id for page_id, value in zip(ordered, found, strict=True) if value is not None}


def remove_ocr_messages(page_ids: Collection[int], stages: Iterable[str]) -> int:
    """Take the queued messages for these pages out of the stages' queues (pages that
    ended while nobody consumed their queue). Returns how many were removed."""
    wanted = set(page_ids)
    client = _markers()
    removed = 0
    for stage in stages:
        queue = get_settings().queue(stage)
        for raw in client.lrange(queue, 0, -1):  # type: ignore[union-attr]
            if _ocr_page_id(raw) in wanted:
                removed += int(client.lrem(queue, 1, raw))  # type: ignore[arg-type]
    if wanted:
        client.delete(*[_pending_key(page_id) for page_id in wanted])
    return removed


def _ocr_page_id(raw: bytes) -> int | None:
    # A Celery (protocol 2) message as the Redis transport stores it: the body is the
    # base64 of [args, kwargs, embed]. Anything else is not ours to judge here.
    try:
        message: dict[str, Any] = json.loads(raw)
        if message.get("headers", {}).get("task") != OCR_TASK:
            return None
        args = json.loads(base64.b64decode(message["body"]))[0]
        return int(args[0])
    except (ValueError, TypeError, KeyError, IndexError):
        return None


def publish_finalize(job_id: str) -> None:
    _send(FINALIZE_TASK, [job_id])


def publish_webhook_delivery(delivery_id: str, countdown_s: float | None = None) -> None:
    _send(WEBHOOK_DELIVERY_TASK, [delivery_id], countdown_s=countdown_s)
