"""The Celery application's configuration and the publishing side of the queues.

The API publishes by task name, so it never imports worker code (or models).
Messages carry ids only; Postgres holds everything else.
"""

from __future__ import annotations

from functools import lru_cache

from celery import Celery

from pagemill.domain import Stage
from pagemill.settings import Settings, get_settings

PREPARE_TASK = "pagemill.prepare"
OCR_TASK = "pagemill.ocr_page"
FINALIZE_TASK = "pagemill.finalize"
WEBHOOK_DELIVERY_TASK = "pagemill.webhooks.deliver"
# Its own queue: slow or dead receivers must never hold up pages.
WEBHOOKS_QUEUE = "webhooks"


def make_celery(settings: Settings) -> Celery:
    app = Celery("pagemill", broker=settings.broker_url)
    transport_options = {
        # Redis redelivers unacknowledged messages after this; tasks stay below it.
        "visibility_timeout": settings.broker_visibility_timeout_s,
    }
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
        # The soft limit leaves task_cleanup_s to record why a page stopped and what it
        # cost; a page stuck in C code past that is killed, and the worker's main process
        # records it instead (worker.tasks).
        task_soft_time_limit=settings.task_time_limit_s - settings.task_cleanup_s,
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


def publish_prepare(job_id: str) -> None:
    get_celery().send_task(PREPARE_TASK, args=[job_id])


# GPU pages are split by licence class: only workers whose licence basis permits
# commercial use consume the commercial queue, so a commercial page can never be
# picked up by a worker that may not process it.
OCR_GPU_STAGE = "ocr-gpu"
OCR_GPU_COMMERCIAL_STAGE = "ocr-gpu-commercial"
GPU_ENGINES = frozenset({"vllm"})


def ocr_stage(engine: str | None, license_use: str | None) -> str:
    if engine not in GPU_ENGINES:
        return Stage.ocr.value
    return OCR_GPU_COMMERCIAL_STAGE if license_use == "commercial" else OCR_GPU_STAGE


def publish_ocr(
    page_id: int,
    engine: str | None = None,
    license_use: str | None = None,
    countdown_s: float | None = None,
) -> None:
    queue = get_settings().queue(ocr_stage(engine, license_use))
    get_celery().send_task(OCR_TASK, args=[page_id], countdown=countdown_s, queue=queue)


def publish_finalize(job_id: str) -> None:
    get_celery().send_task(FINALIZE_TASK, args=[job_id])


def publish_webhook_delivery(delivery_id: str, countdown_s: float | None = None) -> None:
    get_celery().send_task(WEBHOOK_DELIVERY_TASK, args=[delivery_id], countdown=countdown_s)
