"""finalize: assemble document.md and manifest.json, then make the job terminal.

Every start is counted on the job (`finalize_attempts`). A start that fails, whether
stopped at the soft time limit, killed at the hard one (recorded by the worker's main
process, `record_finalize_failure`) or by an error, keeps its reason and is tried
again; after PAGEMILL_FINALIZE_MAX_ATTEMPTS the job fails with that reason. A start
lost with its worker records nothing, so the start after the cap fails the job with
the last error recorded.

A start holds a lease on the job (`finalize_lease_expires_at`) until it ends or fails,
renewed by each of its outage retries: other deliveries of the message meanwhile (a
duplicate, or the reaper's copy of a message it took for lost) count no start and do
nothing, so they cannot use up the cap while one start waits out an S3 outage.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta

from sqlalchemy.orm import Session, sessionmaker

from pagemill.db.models import Job, Page
from pagemill.domain import TERMINAL_PAGE_STATUSES, JobStatus, PageStatus
from pagemill.jobs import lifecycle, purge, repository
from pagemill.jobs.summaries import build_manifest, manifest_json
from pagemill.quality.furniture import FurnitureMode
from pagemill.settings import Settings
from pagemill.storage import JobKeys
from worker.pipeline import assemble_document
from worker.stages.context import StageContext
from worker.stages.invoice import store_invoice

log = logging.getLogger(__name__)

FINALIZE_FAILED = "finalize_failed"


def finalize_job(
    ctx: StageContext, job_id: uuid.UUID, count_start: bool = True
) -> JobStatus | None:
    """Returns the status the job ended with, or None when it is not ready or already
    ended. Safe to run twice: objects are overwritten with the same bytes and only
    one run moves the job to a terminal state.

    `count_start` is False for a retry of the same start through an outage: those
    are capped by the task's retries, not by the finalize attempts."""
    # Reads, and one conditional update: each statement commits on its own.
    with repository.autocommit(ctx.sessions) as session:
        job = repository.get_job(session, job_id)
        if job is None or job.status is not JobStatus.running:
            return None
        pages = repository.list_pages(session, job_id, with_staged_markdown=True)
        if not _all_pages_ended(job, pages):
            return None
        last_error = job.error_message
        # The lease is the page lease, longer than the task time limit: a live start is
        # never counted over. A start lost with its worker is taken over when it runs out.
        lease = timedelta(seconds=ctx.settings.page_lease_s)
        attempts = None
        if count_start:
            attempts = repository.start_finalize(session, job_id, lease)
            if attempts is None:
                return None  # another start is under way, or the job has ended
        else:
            repository.renew_finalize_lease(session, job_id, lease)
    if attempts is not None and attempts > ctx.settings.finalize_max_attempts:
        why = (
            f"The result could not be assembled in {attempts - 1} attempts; "
            f"last error: {last_error or 'none recorded'}"
        )
        with ctx.sessions.begin() as session:
            won = lifecycle.end_job(session, job_id, JobStatus.failed, FINALIZE_FAILED, why)
        return JobStatus.failed if won else None
    keys = JobKeys(job_id)
    markdown_by_page = [(page.number, _markdown_of(ctx, keys, page)) for page in pages]
    document = assemble_document(markdown_by_page, FurnitureMode(job.furniture))
    ctx.store.put_bytes(keys.document, document.markdown.encode(), "text/markdown")
    with repository.autocommit(ctx.sessions) as session:
        repository.record_page_furniture(session, job_id, document.furniture)
        pages = repository.list_pages(session, job_id)
    manifest = build_manifest(job, pages)
    ctx.store.put_bytes(keys.manifest, manifest_json(manifest), "application/json")
    if job.extract == "invoice":
        succeeded = [
            (page.number, page.result_attempt)
            for page in pages
            if page.status is PageStatus.succeeded
        ]
        store_invoice(ctx.store, job_id, succeeded)
    written = [keys.document, keys.manifest, keys.invoice]
    failed = [page for page in pages if page.status is PageStatus.failed]
    status = JobStatus.failed if failed else JobStatus.succeeded
    error_code = error_message = None
    if failed:
        error_code = "pages_failed"
        error_message = (
            f"{len(failed)} of {len(pages)} pages failed; page {failed[0].number}: "
            f"{failed[0].error or 'no error recorded'}"
        )
    with ctx.sessions.begin() as session:
        won = lifecycle.end_job(session, job_id, status, error_code, error_message)
    if not won:
        # Ended elsewhere meanwhile. The purge fence is checked only now, after the
        # objects were written: a job this start ended cannot have begun a purge before
        # (only an ended job can), and one that ended elsewhere may have, its listing
        # missing what was written here (pagemill.jobs.purge).
        purge.discard_if_purged(ctx.sessions, ctx.store, job_id, written)
        return None
    return status


def _markdown_of(ctx: StageContext, keys: JobKeys, page: Page) -> str | None:
    """A succeeded page's Markdown: kept on its row by its result, or read from S3 where
    it could not be (worker.stages.ocr.stageable_markdown)."""
    if page.status is not PageStatus.succeeded:
        return None
    if page.staged_markdown is not None:
        return page.staged_markdown
    return ctx.store.get_bytes(keys.page_markdown(page.number, page.result_attempt)).decode()


def _all_pages_ended(job: Job, pages: list[Page]) -> bool:
    """Counted against the job's page total, not the rows present, because prepare may
    still be adding pages (as repository.all_pages_terminal counts)."""
    ended = sum(page.status in TERMINAL_PAGE_STATUSES for page in pages)
    return job.pages_total is not None and ended >= job.pages_total


def fail_unstorable_job(ctx: StageContext, job_id: uuid.UUID, why: str) -> None:
    with ctx.sessions.begin() as session:
        lifecycle.end_job(
            session,
            job_id,
            JobStatus.failed,
            "result_not_stored",
            f"Every page was processed but the result could not be stored: {why}",
        )


def finalize_time_limit_message(settings: Settings) -> str:
    return f"assembling the result exceeded the {settings.task_time_limit_s} s time limit"


def record_finalize_failure(
    sessions: sessionmaker[Session], settings: Settings, job_id: uuid.UUID, why: str
) -> bool:
    """Keep why this finalize start failed. Returns whether finalize should run again;
    at PAGEMILL_FINALIZE_MAX_ATTEMPTS starts the job fails with the reason instead.

    Also called by the worker's main process when it killed a pool child finalizing
    this job at the hard time limit, so the child could record nothing itself."""
    with sessions.begin() as session:
        attempts = repository.record_finalize_failure(session, job_id, why)
        if attempts is None:
            return False  # ended meanwhile
        log.warning("job %s finalize attempt %s: %s", job_id, attempts, why)
        if attempts == 0:
            return False  # failed before its start was counted: the reaper tries again
        if attempts < settings.finalize_max_attempts:
            return True
        message = f"The result could not be assembled: {why} ({attempts} attempts)."
        lifecycle.end_job(session, job_id, JobStatus.failed, FINALIZE_FAILED, message)
        return False
