"""finalize: assemble document.md and manifest.json, then make the job terminal."""

from __future__ import annotations

import json
import uuid

from pagemill.domain import JobStatus, PageStatus
from pagemill.jobs import repository
from pagemill.jobs.summaries import build_manifest
from pagemill.quality.furniture import FurnitureMode
from pagemill.storage import JobKeys
from worker.pipeline import assemble_document
from worker.stages.context import StageContext


def finalize_job(ctx: StageContext, job_id: uuid.UUID) -> JobStatus | None:
    """Returns the status the job ended with, or None when it is not ready or already
    ended. Safe to run twice: objects are overwritten with the same bytes and only
    one run moves the job to a terminal state."""
    with ctx.sessions.begin() as session:
        job = repository.get_job(session, job_id)
        if job is None or job.status is not JobStatus.running:
            return None
        if not repository.all_pages_terminal(session, job_id):
            return None
        pages = repository.list_pages(session, job_id)
    keys = JobKeys(job_id)
    markdown_by_page = [
        (
            page.number,
            ctx.store.get_bytes(keys.page_markdown(page.number)).decode()
            if page.status is PageStatus.succeeded
            else None,
        )
        for page in pages
    ]
    document = assemble_document(markdown_by_page, FurnitureMode(job.furniture))
    ctx.store.put_bytes(keys.document, document.markdown.encode(), "text/markdown")
    with ctx.sessions.begin() as session:
        repository.record_page_furniture(session, job_id, document.furniture)
        pages = repository.list_pages(session, job_id)
    manifest = build_manifest(job, pages)
    ctx.store.put_bytes(keys.manifest, json.dumps(manifest, indent=2).encode(), "application/json")
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
        won = repository.complete_job(session, job_id, status, error_code, error_message)
    return status if won else None


def fail_unstorable_job(ctx: StageContext, job_id: uuid.UUID, why: str) -> None:
    with ctx.sessions.begin() as session:
        repository.complete_job(
            session,
            job_id,
            JobStatus.failed,
            "result_not_stored",
            f"Every page was processed but the result could not be stored: {why}",
        )
