"""prepare: count the pages, route each, render it once, store it, queue its OCR."""

from __future__ import annotations

import dataclasses
import logging
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import select

from pagemill.db.models import Page
from pagemill.documents.pagerange import parse_page_selection
from pagemill.domain import JobStatus
from pagemill.jobs import repository
from pagemill.storage import JobKeys
from worker.engines.registry import render_dpi_for
from worker.engines.router import route_page
from worker.render import RenderedPage, render_pages
from worker.stages.context import StageContext

log = logging.getLogger(__name__)


class PrepareFailed(Exception):
    """The document cannot be split into pages; retrying will not help."""


def prepare_job(ctx: StageContext, job_id: uuid.UUID, publish_ocr: Callable[[int], None]) -> int:
    """Prepare every selected page not prepared yet; returns how many pages were queued.

    Safe to run twice: pages already recorded are skipped, and OCR messages for
    queued pages are published again (a duplicate OCR message is harmless).
    """
    with ctx.sessions.begin() as session:
        job = repository.start_job(session, job_id)
        if job is None:
            return 0
        numbers = parse_page_selection(job.page_selection, job.document_pages)
        done = set(session.scalars(select(Page.number).where(Page.job_id == job_id)))
        requested_engine, kind = job.engine, job.source_kind
    keys = JobKeys(job_id)
    todo = [number for number in numbers if number not in done]
    dpi = render_dpi_for(ctx.settings.ocr_engine)
    with tempfile.TemporaryDirectory(prefix="pagemill-prepare-") as workdir:
        source = Path(workdir) / "source"
        ctx.store.download_file(keys.source, source)
        try:
            pages = render_pages(source, kind, todo, dpi, ctx.settings.max_render_pixels)
            for rendered in pages:
                if not _job_still_running(ctx, job_id):
                    return 0  # cancelled while preparing: pages not yet stored never run
                page_id = _store_page(ctx, job_id, keys, rendered, requested_engine)
                if page_id is not None:
                    publish_ocr(page_id)
        except Exception as error:
            # Storage and database errors are raised on; only the document's own are final.
            if _is_document_error(error):
                raise PrepareFailed(f"A page could not be rendered: {error}") from error
            raise
    with ctx.sessions.begin() as session:
        queued = repository.queued_page_ids(session, job_id)
    for page_id in queued:
        publish_ocr(page_id)
    return len(queued)


def _store_page(
    ctx: StageContext,
    job_id: uuid.UUID,
    keys: JobKeys,
    rendered: RenderedPage,
    requested_engine: str,
) -> int | None:
    number = rendered.facts.number
    route = route_page(
        requested_engine, rendered.facts, rendered.pdf_page is not None, ctx.settings.ocr_engine
    )
    ctx.store.put_bytes(keys.page_image(number), rendered.image_png, "image/png")
    if rendered.pdf_page is not None:
        ctx.store.put_bytes(keys.page_pdf(number), rendered.pdf_page, "application/pdf")
    with ctx.sessions.begin() as session:
        repository.insert_page(
            session,
            {
                "job_id": job_id,
                "number": number,
                "width_pt": rendered.facts.width_pt,
                "height_pt": rendered.facts.height_pt,
                "image_width_px": rendered.image_width_px,
                "image_height_px": rendered.image_height_px,
                "image_dpi": rendered.image_dpi,
                "text_chars": rendered.facts.text_chars,
                "image_coverage": rendered.facts.image_coverage,
                "facts": dataclasses.asdict(rendered.facts),
                "render_seconds": rendered.render_seconds,
                "engine": route.engine,
                "engine_reason": route.reason,
            },
        )
        page = repository.get_page_by_number(session, job_id, number)
        return page.id if page is not None else None


def _job_still_running(ctx: StageContext, job_id: uuid.UUID) -> bool:
    with ctx.sessions() as session:
        job = repository.get_job(session, job_id)
        return job is not None and job.status is JobStatus.running


def _is_document_error(error: Exception) -> bool:
    module = type(error).__module__ or ""
    return module.startswith(("pymupdf", "PIL")) or isinstance(error, (ValueError, EOFError))


def fail_prepare(ctx: StageContext, job_id: uuid.UUID, message: str) -> None:
    with ctx.sessions.begin() as session:
        repository.complete_job(session, job_id, JobStatus.failed, "prepare_failed", message)
