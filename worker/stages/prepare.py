"""prepare: count the pages, route each, render what its engine reads, store it, queue it.

A page read by OCR is stored as an image; a page read from its text layer as the page
alone in a one-page PDF, with no image (the OCR stage renders one from that PDF only
if a check or repair needs pixels). Making only what the page's engine reads spares
the image, most of a page's rendering cost, for born-digital pages.

Rendering runs in a sandboxed child (pagemill.documents.sandbox): a document that
crashes or hangs the renderer costs a subprocess, and after a few such failures
the job fails with the reason, while the worker lives on.
"""

from __future__ import annotations

import logging
import tempfile
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from sqlalchemy.orm import Session, sessionmaker

from pagemill.documents.pagerange import parse_page_selection
from pagemill.documents.sandbox import (
    DocumentVerdict,
    Idle,
    Limits,
    SandboxFailed,
    run_sandboxed,
)
from pagemill.domain import JobStatus, LicenseUse
from pagemill.jobs import lifecycle, repository
from pagemill.settings import Settings
from pagemill.storage import JobKeys
from worker.engines.base import PageFacts
from worker.engines.registry import render_dpi_for
from worker.stages.context import StageContext
from worker.stages.fetch import fetch_job_source
from worker.stages.page_batches import (
    IDLE_CHECK_S,
    JobEnded,
    PageBatches,
    PreparedPage,
    PublishOcrPages,
)

log = logging.getLogger(__name__)


class PrepareRetry(Exception):
    """The renderer failed below the cap; try the job again shortly."""


def prepare_job(ctx: StageContext, job_id: uuid.UUID, publish_ocr: PublishOcrPages) -> int:
    """Prepare every selected page not prepared yet; returns how many pages were queued.

    Safe to run twice: pages already recorded are skipped, and OCR messages for
    pages an earlier attempt queued are published again (a duplicate is harmless).
    """
    lease = timedelta(seconds=ctx.settings.page_lease_s)
    # The claim (which returns the job) and a read: each statement commits on its own.
    with repository.autocommit(ctx.sessions) as session:
        job = repository.claim_prepare(session, job_id, lease)
        if job is None:
            return 0
        done = repository.page_numbers(session, job_id)
    attempt = job.prepare_attempts
    if attempt > ctx.settings.max_claims:
        reason = (
            f"The document could not be prepared in {attempt - 1} attempts; "
            f"last error: {job.error_message or 'none recorded'}"
        )
        _fail(ctx, job_id, reason)
        return 0
    page_selection, document_pages = job.page_selection, job.document_pages
    # A document given by URL and not fetched yet (by an earlier attempt) has no facts.
    source_url = job.source_url if job.source_sha256 is None else None
    requested_engine, kind = job.engine, job.source_kind
    license_use = job.license_use
    keys = JobKeys(job_id)
    with tempfile.TemporaryDirectory(prefix="pagemill-prepare-") as workdir:
        source = Path(workdir) / "source"
        if source_url is not None:
            try:
                fetched = fetch_job_source(ctx, job_id, attempt, source_url, page_selection, source)
            except SandboxFailed as failure:
                _record_render_failure(ctx, job_id, attempt, str(failure))
                return 0
            except Exception as error:
                _release(ctx, job_id, attempt, str(error))
                raise
            if fetched is None:
                return 0
            kind, document_pages = fetched.kind, fetched.document_pages
        else:
            ctx.store.download_file(keys.source, source)
        assert kind is not None and document_pages is not None  # an uploaded or fetched source
        numbers = parse_page_selection(page_selection, document_pages)
        todo = [number for number in numbers if number not in done]
        args = [
            str(source),
            kind.value,
            str(render_dpi_for(ctx.settings.ocr_engine)),
            str(ctx.settings.max_render_pixels),
            workdir,
            ",".join(str(number) for number in todo),
            requested_engine,
            ctx.settings.ocr_engine,
        ]
        limits = Limits(
            ctx.settings.sandbox_memory_bytes,
            ctx.settings.sandbox_cpu_s,
            ctx.settings.render_timeout_s,
        )
        try:
            # One connection for every batch's rows, each batch written by a statement
            # that commits on its own, with no pool check-out (and its ping, after an
            # idle spell) each.
            with repository.autocommit(ctx.sessions) as recorder:
                batches = PageBatches(ctx.store, recorder, job_id, publish_ocr)
                idle = Idle(IDLE_CHECK_S, batches.flush_if_waited)
                for line in run_sandboxed("worker.render_child", args, limits, idle):
                    batches.add(_store_page_objects(ctx, keys, line, license_use))
                batches.flush()
                # Every page is recorded: release the lease, and find the pages queued.
                repository.finish_prepare(recorder, job_id, attempt)
                queued = repository.queued_pages(recorder, job_id)
        except JobEnded:
            return 0  # cancelled while preparing: pages not yet recorded never run
        except DocumentVerdict as verdict:
            _fail(ctx, job_id, verdict.message)
            return 0
        except SandboxFailed as failure:
            _record_render_failure(ctx, job_id, attempt, str(failure))
            return 0
        except SoftTimeLimitExceeded:
            # The soft limit leaves time to record the failure before the hard kill.
            _record_render_failure(ctx, job_id, attempt, prepare_time_limit_message(ctx.settings))
            return 0
        except Exception as error:
            # Storage or database trouble: free the job for the retry at once.
            _release(ctx, job_id, attempt, str(error))
            raise
    # Pages stored by an earlier attempt may never have been published; this attempt's
    # own pages were, a moment ago, and one message a page is enough.
    publish_ocr([page for page in queued if page.page_id not in batches.published])
    return len(queued)


def _store_page_objects(
    ctx: StageContext, keys: JobKeys, line: dict[str, Any], license_use: LicenseUse
) -> PreparedPage:
    """Store the page's objects; its row is recorded with its batch (PageBatches), after
    them, as the purge requires (pagemill.jobs.purge)."""
    facts = PageFacts.from_stored(line["facts"])
    number = facts.number
    written = []
    if line["image_path"] is not None:
        image_path = Path(line["image_path"])
        ctx.store.put_file(keys.page_image(number), image_path, "image/png")
        image_path.unlink()
        written.append(keys.page_image(number))
    if line["pdf_path"] is not None:
        pdf_path = Path(line["pdf_path"])
        ctx.store.put_file(keys.page_pdf(number), pdf_path, "application/pdf")
        pdf_path.unlink()
        written.append(keys.page_pdf(number))
    row = {
        "number": number,
        "width_pt": facts.width_pt,
        "height_pt": facts.height_pt,
        "image_width_px": line["image_width_px"],
        "image_height_px": line["image_height_px"],
        "image_dpi": line["image_dpi"],
        "text_chars": facts.text_chars,
        "image_coverage": facts.image_coverage,
        "facts": line["facts"],
        "render_seconds": line["render_seconds"],
        # Routed in the child, from the facts above (worker.render_child).
        "engine": line["engine"],
        "engine_reason": line["engine_reason"],
        "license_use": license_use,
    }
    return PreparedPage(row, line["engine"], written)


def prepare_time_limit_message(settings: Settings) -> str:
    return f"preparing the document exceeded the {settings.task_time_limit_s} s time limit"


def record_prepare_time_limit_kill(
    sessions: sessionmaker[Session], settings: Settings, job_id: uuid.UUID
) -> bool:
    """Called by the worker's main process when a pool child preparing this job was
    killed at the hard time limit, so the child could record nothing itself. Returns
    whether the job should be prepared again.

    The attempt is the job's running prepare: its lease outlasts the time limit, so
    no other attempt can have claimed the job meanwhile.
    """
    why = prepare_time_limit_message(settings)
    with sessions.begin() as session:
        attempt = repository.running_prepare_attempt(session, job_id)
        if attempt is None:
            return False
        log.warning("job %s prepare attempt %s: %s", job_id, attempt, why)
        failures = repository.count_prepare_failure(session, job_id, attempt, why)
        if failures < settings.prepare_max_failures:
            return True
        lifecycle.end_job(
            session, job_id, JobStatus.failed, "prepare_failed", _failed_message(why, failures)
        )
        return False


def _failed_message(why: str, failures: int) -> str:
    return f"The document could not be prepared: {why} ({failures} attempts)."


def _record_render_failure(ctx: StageContext, job_id: uuid.UUID, attempt: int, why: str) -> None:
    """A crash or a timeout may be the machine's fault once; a few in a row are the
    document's. Below the cap the lease is released so the job is tried again."""
    log.warning("job %s prepare attempt %s: %s", job_id, attempt, why)
    with ctx.sessions.begin() as session:
        failures = repository.count_prepare_failure(session, job_id, attempt, why)
        if failures >= ctx.settings.prepare_max_failures:
            lifecycle.end_job(
                session, job_id, JobStatus.failed, "prepare_failed", _failed_message(why, failures)
            )
            return
    raise PrepareRetry(why)


def _release(ctx: StageContext, job_id: uuid.UUID, attempt: int, why: str) -> None:
    try:
        with ctx.sessions.begin() as session:
            repository.release_prepare(session, job_id, attempt, why)
    except Exception:
        log.warning("could not release prepare of job %s; its lease will run out", job_id)


def _fail(ctx: StageContext, job_id: uuid.UUID, message: str) -> None:
    with ctx.sessions.begin() as session:
        lifecycle.end_job(session, job_id, JobStatus.failed, "prepare_failed", message)
