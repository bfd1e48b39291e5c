"""The reaper: publishes again any work whose message was lost.

Publishing happens after commit, so a crash (or a broker that lost its data)
between the commit and the publish leaves a job or page that no message points
at. The database is the outbox: every few seconds one worker, chosen by a
Postgres advisory lock, looks for such rows and publishes their messages again.
Duplicates are harmless because every stage claims its work conditionally, but a
page is published again only when no message for it is pending (pagemill.queue), so
a queue that waits never fills with copies.

Pages for a GPU engine that no live worker can run fail once none has been alive
for `gpu_worker_wait_s`, and their messages leave the queue: a job never waits
forever for a GPU that is gone.

Jobs past their client's retention are purged (pagemill.jobs.purge), a batch a pass, and
purges that stopped half-way (an outage, a process that died) are finished.
"""

from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy.orm import Session, sessionmaker

from pagemill import queue
from pagemill.domain import QueuedPage
from pagemill.engines import catalog
from pagemill.jobs import purge, repository
from pagemill.settings import Settings
from pagemill.storage import get_object_store
from pagemill.webhooks import outbox as webhook_outbox

log = logging.getLogger(__name__)

# Any constant works; it only has to be the same in every process.
REAPER_LOCK_KEY = 0x7061_6765


@dataclass
class ReapReport:
    prepares: list[str] = field(default_factory=list)
    pages: list[QueuedPage] = field(default_factory=list)
    finalizes: list[str] = field(default_factory=list)
    # Pages failed because no worker able to run them has been alive for the wait.
    unrunnable: list[int] = field(default_factory=list)
    # Not counted in `total`: most are retries falling due, not lost work.
    webhooks: list[str] = field(default_factory=list)
    # Jobs purged: past their retention, or a purge finished after an interruption.
    purged: int = 0

    @property
    def total(self) -> int:
        return len(self.prepares) + len(self.pages) + len(self.finalizes)


def reap_once(sessions: sessionmaker[Session], settings: Settings) -> ReapReport | None:
    """One pass. None when another process holds the reaper lock."""
    stale = timedelta(seconds=settings.stale_after_s)
    report = ReapReport()
    with sessions.begin() as session:
        if not repository.try_advisory_xact_lock(session, REAPER_LOCK_KEY):
            return None
        report.prepares = [
            str(job_id)
            for job_id in repository.take_stale_queued_jobs(session, stale)
            + repository.take_abandoned_prepares(session, stale)
        ]
        report.pages = repository.take_stranded_pages(session, stale)
        report.finalizes = [str(i) for i in repository.take_unfinalized_jobs(session, stale)]
        unrunnable = _fail_pages_nobody_can_run(session, settings)
        report.unrunnable = [page_id for page_id, _ in unrunnable]
        # Finalize ends the job once its last page has (and does nothing before).
        report.finalizes += sorted({str(job_id) for _, job_id in unrunnable})
        # Also retries due too far ahead for a delayed message: published when due.
        report.webhooks = [str(i) for i in webhook_outbox.due_deliveries(session, stale)]
    for job_id in report.prepares:
        queue.publish_prepare(job_id)
    pending = queue.pages_with_pending_message([page.page_id for page in report.pages])
    report.pages = [page for page in report.pages if page.page_id not in pending]
    for page in report.pages:
        queue.publish_ocr(page.page_id, page.engine, page.license_use)
    if report.unrunnable:
        queue.remove_ocr_messages(report.unrunnable, catalog.GPU_STAGES)
    for job_id in report.finalizes:
        queue.publish_finalize(job_id)
    for delivery_id in report.webhooks:
        queue.publish_webhook_delivery(delivery_id)
    if report.unrunnable:
        log.warning(
            "failed %d pages: no GPU worker able to run them for %g s",
            len(report.unrunnable),
            settings.gpu_worker_wait_s,
        )
    if report.total:
        log.warning(
            "republished lost work: %d prepare, %d page, %d finalize",
            len(report.prepares),
            len(report.pages),
            len(report.finalizes),
        )
    store = get_object_store()
    report.purged = purge.purge_expired(sessions, store, settings)
    report.purged += purge.finish_unfinished(sessions, store, settings)
    return report


def _fail_pages_nobody_can_run(session: Session, settings: Settings) -> list[tuple[int, uuid.UUID]]:
    wait = timedelta(seconds=settings.gpu_worker_wait_s)
    failed: list[tuple[int, uuid.UUID]] = []
    for engine in sorted(catalog.GPU_ENGINES):
        why = (
            f"Not read: no GPU worker able to run {engine} for this page has been alive "
            f"in the last {settings.gpu_worker_wait_s:g} s."
        )
        failed += repository.fail_pages_nobody_can_run(session, engine, wait, why)
    return failed


def run_reaper(sessions: sessionmaker[Session], settings: Settings, stop: threading.Event) -> None:
    """Reap until `stop` is set. Errors are logged and the loop goes on: a database
    or broker outage is exactly when lost work piles up."""
    while not stop.wait(settings.reaper_interval_s):
        try:
            reap_once(sessions, settings)
        except Exception:
            log.exception("reaper pass failed; retrying next interval")


def start_reaper_thread(sessions: sessionmaker[Session], settings: Settings) -> threading.Event:
    stop = threading.Event()
    thread = threading.Thread(
        target=run_reaper, args=(sessions, settings, stop), name="pagemill-reaper", daemon=True
    )
    thread.start()
    return stop
