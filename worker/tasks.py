"""Thin Celery tasks: take ids, call a stage, publish what comes next.

Each task says its queue (through the routes in pagemill.queue), its retries and
its time limit where it is defined; the logic lives in worker.stages.
"""

from __future__ import annotations

import logging
import uuid
from functools import lru_cache

from celery import Task

from pagemill.db.session import session_factory
from pagemill.queue import FINALIZE_TASK, OCR_TASK, PREPARE_TASK, publish_finalize, publish_ocr
from pagemill.settings import get_settings
from pagemill.storage import get_object_store
from worker.celery_app import app
from worker.stages.context import StageContext
from worker.stages.finalize import finalize_job
from worker.stages.ocr import PageOutcome, run_page
from worker.stages.prepare import PrepareFailed, fail_prepare, prepare_job

log = logging.getLogger(__name__)

# Storage and database outages are retried this many times, with backoff, before
# the job is failed with the error that stopped it.
INFRASTRUCTURE_RETRIES = 5


@lru_cache(maxsize=1)
def _context() -> StageContext:
    settings = get_settings()
    return StageContext(settings=settings, sessions=session_factory(), store=get_object_store())


@app.task(name=PREPARE_TASK, bind=True, max_retries=INFRASTRUCTURE_RETRIES)
def prepare(task: Task, job_id: str) -> None:
    ctx = _context()
    try:
        prepare_job(ctx, uuid.UUID(job_id), publish_ocr)
    except PrepareFailed as error:
        fail_prepare(ctx, uuid.UUID(job_id), str(error))
        return
    except Exception as error:
        if task.request.retries >= INFRASTRUCTURE_RETRIES:
            fail_prepare(ctx, uuid.UUID(job_id), f"Preparing the document failed: {error}")
            return
        raise task.retry(exc=error, countdown=2 ** (task.request.retries + 1)) from error


@app.task(name=OCR_TASK, bind=True, max_retries=INFRASTRUCTURE_RETRIES)
def ocr_page(task: Task, page_id: int) -> None:
    ctx = _context()
    try:
        run = run_page(ctx, page_id)
    except Exception as error:
        # Engine errors are handled inside run_page; what reaches here is infrastructure.
        raise task.retry(exc=error, countdown=2 ** (task.request.retries + 1)) from error
    if run.outcome is PageOutcome.retry:
        publish_ocr(page_id, countdown_s=run.retry_in_s)
    if run.job_complete and run.job_id is not None:
        publish_finalize(str(run.job_id))


@app.task(name=FINALIZE_TASK, bind=True, max_retries=INFRASTRUCTURE_RETRIES)
def finalize(task: Task, job_id: str) -> None:
    ctx = _context()
    try:
        status = finalize_job(ctx, uuid.UUID(job_id))
    except Exception as error:
        raise task.retry(exc=error, countdown=2 ** (task.request.retries + 1)) from error
    if status is not None:
        log.info("job %s %s", job_id, status.value)
