"""Thin Celery tasks: take ids, call a stage, publish what comes next.

Each task's queue comes from the routes in pagemill.queue; its retries are here.
Outages of storage, database or broker are retried with capped exponential
backoff; what outlasts the retries is found again by the reaper, and every
claim is capped in the database, so no work retries forever.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import OrderedDict
from functools import lru_cache
from typing import Any

from billiard.einfo import ExceptionInfo, ExceptionWithTraceback
from billiard.exceptions import WorkerLostError
from celery import Task
from celery.exceptions import Reject, SoftTimeLimitExceeded, TimeLimitExceeded
from celery.signals import task_failure
from celery.worker.request import Request
from sqlalchemy.exc import DBAPIError

from pagemill.db.session import session_factory
from pagemill.queue import (
    FINALIZE_TASK,
    OCR_TASK,
    PREPARE_TASK,
    ocr_message_taken,
    publish_finalize,
    publish_ocr,
    publish_ocr_pages,
    publish_prepare,
)
from pagemill.settings import get_settings
from pagemill.storage import StorageUnavailable, get_object_store
from pagemill.webhooks.outbox import publish_job_webhooks
from worker.bridge import BridgeClosed
from worker.celery_app import app
from worker.retries import outage_backoff_s
from worker.stages.context import StageContext
from worker.stages.finalize import (
    fail_unstorable_job,
    finalize_job,
    finalize_time_limit_message,
    record_finalize_failure,
)
from worker.stages.ocr import (
    PageOutcome,
    PageRun,
    record_time_limit_kill,
    release_lost_attempt,
    run_page,
)
from worker.stages.prepare import PrepareRetry, prepare_job, record_prepare_time_limit_kill

log = logging.getLogger(__name__)

OUTAGES = (StorageUnavailable, DBAPIError, ConnectionError)


@lru_cache(maxsize=1)
def _context() -> StageContext:
    settings = get_settings()
    return StageContext(settings=settings, sessions=session_factory(), store=get_object_store())


@app.task(name=PREPARE_TASK, bind=True, max_retries=get_settings().outage_retries)
def prepare(task: Task, job_id: str) -> None:
    try:
        prepare_job(_context(), uuid.UUID(job_id), publish_ocr_pages)
    except PrepareRetry as error:
        raise task.retry(exc=error, countdown=5) from error
    except OUTAGES as error:
        log.warning("prepare %s: outage, retrying: %s", job_id, error)
        raise task.retry(exc=error, countdown=outage_backoff_s(task.request.retries)) from error


class _LostChildRequest(Request):  # type: ignore[misc]  # Celery's classes are untyped
    """A task's request, as the worker's main process handles it. When the pool child
    running it dies (the OOM killer, a crash in native code), Celery puts the message
    back on the queue (the task rejects on a lost worker) but sends no failure signal;
    `let_go` frees what the dead child held, before the message is requeued."""

    def let_go(self) -> None:
        raise NotImplementedError

    def on_failure(
        self, exc_info: ExceptionInfo, send_failed_event: bool = True, return_ok: bool = False
    ) -> None:
        error = exc_info.exception
        if isinstance(error, ExceptionWithTraceback):
            error = error.exc
        # A child killed at the hard time limit is reported lost too, after the limit was
        # recorded (`_count_hard_time_limit`): what it held is already given back, and may
        # by now be another child's.
        if isinstance(error, WorkerLostError) and not _kill_recorded(self.id):
            try:
                self.let_go()
            except Exception:
                log.exception(
                    "%s %s: could not let go of a lost process's hold", self.name, self.args
                )
        super().on_failure(exc_info, send_failed_event, return_ok)


class PageRequest(_LostChildRequest):
    """The page's claim is let go, so the requeued message reads it again at once."""

    def let_go(self) -> None:
        release_lost_attempt(session_factory(), get_settings(), int(self.args[0]))


@app.task(name=OCR_TASK, bind=True, max_retries=get_settings().outage_retries, Request=PageRequest)
def ocr_page(task: Task, page_id: int) -> None:
    # From here on the page's message is no longer pending: a loss now is the reaper's.
    ocr_message_taken(page_id)
    try:
        run = run_page(_context(), page_id, outage_backoff_s(task.request.retries))
    except BridgeClosed as closing:
        # This worker is shutting down: the message goes back for another worker.
        raise Reject(closing, requeue=True) from closing
    except OUTAGES as error:
        log.warning("page %s: outage, retrying: %s", page_id, error)
        raise task.retry(exc=error, countdown=outage_backoff_s(task.request.retries)) from error
    _publish_next(page_id, run)


def _publish_next(page_id: int, run: PageRun) -> None:
    if run.outcome is PageOutcome.retry:
        publish_ocr(page_id, run.engine, run.license_use, countdown_s=run.retry_in_s)
    if run.job_complete and run.job_id is not None:
        publish_finalize(str(run.job_id))


# Task ids whose hard kill was recorded. Celery sends task_failure twice for one hard
# kill (from the timeout and again from the lost child's failure), and a kill must count
# once. A few hundred ids outlast the moment between the two many times over.
_KILLS_RECORDED: OrderedDict[str, None] = OrderedDict()
_KILLS_REMEMBERED = 512
_kills_lock = threading.Lock()


def _first_report_of_kill(task_id: str) -> bool:
    with _kills_lock:
        if task_id in _KILLS_RECORDED:
            return False
        _KILLS_RECORDED[task_id] = None
        while len(_KILLS_RECORDED) > _KILLS_REMEMBERED:
            _KILLS_RECORDED.popitem(last=False)
        return True


def _kill_recorded(task_id: str) -> bool:
    with _kills_lock:
        return task_id in _KILLS_RECORDED


@task_failure.connect
def _count_hard_time_limit(
    sender: Task | None = None,
    task_id: str | None = None,
    exception: BaseException | None = None,
    args: Any = None,
    **_: Any,
) -> None:
    # Sent in the worker's main process when it kills a pool child at the hard time limit;
    # the child could record nothing, and its message is acknowledged, so the failure is
    # recorded and the retry published here.
    if sender is None or not isinstance(exception, TimeLimitExceeded):
        return
    if task_id is not None and not _first_report_of_kill(task_id):
        return
    try:
        if sender.name == OCR_TASK:
            page_id = int(args[0])
            _publish_next(
                page_id, record_time_limit_kill(session_factory(), get_settings(), page_id)
            )
        elif sender.name == PREPARE_TASK:
            job_id = uuid.UUID(args[0])
            if record_prepare_time_limit_kill(session_factory(), get_settings(), job_id):
                publish_prepare(str(job_id))
        elif sender.name == FINALIZE_TASK:
            job_id = uuid.UUID(args[0])
            _record_finalize_failure(job_id, finalize_time_limit_message(get_settings()))
    except Exception:
        log.exception(
            "%s %s: could not record its time limit; the reaper will retry it", sender.name, args
        )


LOST_FINALIZE_MESSAGE = "the worker process assembling the result died"


class FinalizeRequest(_LostChildRequest):
    """The start's lease on the job is let go (its failure kept, as a time limit's is),
    so the requeued message starts finalize again at once rather than when the lease runs
    out; at the cap of starts, the job fails with the reason instead."""

    def let_go(self) -> None:
        job_id = uuid.UUID(self.args[0])
        if not record_finalize_failure(
            session_factory(), get_settings(), job_id, LOST_FINALIZE_MESSAGE
        ):
            publish_job_webhooks(job_id)


@app.task(
    name=FINALIZE_TASK,
    bind=True,
    max_retries=get_settings().outage_retries,
    Request=FinalizeRequest,
)
def finalize(task: Task, job_id: str) -> None:
    job = uuid.UUID(job_id)
    try:
        # Retries through an outage belong to the start that met it.
        status = finalize_job(_context(), job, count_start=task.request.retries == 0)
    except OUTAGES as error:
        if task.request.retries >= (task.max_retries or 0):
            # The pages are done; only storing the result failed. Say so, and stop.
            fail_unstorable_job(_context(), job, str(error))
            publish_job_webhooks(job)
            return
        log.warning("finalize %s: outage, retrying: %s", job_id, error)
        raise task.retry(exc=error, countdown=outage_backoff_s(task.request.retries)) from error
    except SoftTimeLimitExceeded:
        # The soft limit leaves time to record the failure before the hard kill.
        _record_finalize_failure(job, finalize_time_limit_message(get_settings()))
        return
    except Exception as error:
        log.exception("finalize %s failed", job_id)
        _record_finalize_failure(job, str(error) or type(error).__name__)
        return
    if status is not None:
        log.info("job %s %s", job_id, status.value)
        publish_job_webhooks(job)


def _record_finalize_failure(job_id: uuid.UUID, why: str) -> None:
    if record_finalize_failure(session_factory(), get_settings(), job_id, why):
        publish_finalize(str(job_id))
    else:
        # The job has ended (here or meanwhile): its event's delivery goes out now.
        publish_job_webhooks(job_id)
