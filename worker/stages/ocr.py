"""ocr: one page through its engine, Markdown to S3, the result on the page row."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from enum import StrEnum

from pagemill.domain import PageStatus
from pagemill.jobs import repository
from pagemill.jobs.repository import PageClaim
from pagemill.storage import JobKeys
from worker.engines.base import EngineError, PageFacts, PageInput
from worker.engines.registry import get_engine
from worker.stages.context import StageContext

log = logging.getLogger(__name__)

# The lease outlives the task's hard time limit, so a live attempt is never reclaimed.
LEASE_MARGIN_S = 60
# Backoff between attempts of a failing page: seconds, by attempt number.
RETRY_BACKOFF_S = (2.0, 10.0, 30.0)


class PageOutcome(StrEnum):
    succeeded = "succeeded"
    retry = "retry"
    failed = "failed"
    skipped = "skipped"  # done, cancelled or held by another attempt


@dataclass(frozen=True)
class PageRun:
    outcome: PageOutcome
    job_id: uuid.UUID | None = None
    job_complete: bool = False
    retry_in_s: float = 0.0


def run_page(ctx: StageContext, page_id: int) -> PageRun:
    lease = timedelta(seconds=ctx.settings.task_time_limit_s + LEASE_MARGIN_S)
    with ctx.sessions.begin() as session:
        claim = repository.claim_page(session, page_id, lease)
        if claim is None:
            return PageRun(PageOutcome.skipped)
        page = repository.get_page(session, page_id)
        assert page is not None
        engine_name = page.engine or ctx.settings.ocr_engine
        facts = PageFacts(**page.facts)
        image_dpi = page.image_dpi or 150
    keys = JobKeys(claim.job_id)
    try:
        page_input = _load_page_input(ctx, keys, claim.number, engine_name, facts, image_dpi)
        result = get_engine(engine_name).convert(page_input)
    except Exception as error:
        return _record_failure(ctx, claim, error)
    ctx.store.put_bytes(keys.page_markdown(claim.number), result.markdown.encode(), "text/markdown")
    compute_seconds = result.compute_seconds
    with ctx.sessions.begin() as session:
        finished = repository.finish_page(
            session,
            claim,
            {
                "status": PageStatus.succeeded,
                "device_kind": result.device_kind,
                "compute_seconds": compute_seconds,
                "cost_usd": _cost_usd(compute_seconds, ctx.settings.cpu_price_usd_per_hour),
                "output_chars": len(result.markdown),
                "prompt_tokens": result.prompt_tokens,
                "output_tokens": result.output_tokens,
                "finish_reason": result.finish_reason,
                "engine_details": result.details,
                "error": None,
            },
        )
        if not finished:
            log.info("page %s attempt %s lost its claim; result discarded", page_id, claim.attempt)
            return PageRun(PageOutcome.skipped)
        complete = repository.all_pages_terminal(session, claim.job_id)
    return PageRun(PageOutcome.succeeded, claim.job_id, job_complete=complete)


def _load_page_input(
    ctx: StageContext,
    keys: JobKeys,
    number: int,
    engine_name: str,
    facts: PageFacts,
    image_dpi: int,
) -> PageInput:
    # The text layer engine never looks at pixels: skip fetching them.
    image = b"" if engine_name == "textlayer" else ctx.store.get_bytes(keys.page_image(number))
    pdf_page = ctx.store.get_bytes(keys.page_pdf(number)) if engine_name == "textlayer" else None
    return PageInput(facts=facts, image_png=image, image_dpi=image_dpi, pdf_page=pdf_page)


def _record_failure(ctx: StageContext, claim: PageClaim, error: Exception) -> PageRun:
    message = str(error) if isinstance(error, EngineError) else f"{type(error).__name__}: {error}"
    final = claim.attempt >= ctx.settings.page_max_attempts
    log.warning("page %s attempt %s failed: %s", claim.page_id, claim.attempt, message)
    with ctx.sessions.begin() as session:
        status = PageStatus.failed if final else PageStatus.queued
        written = repository.finish_page(session, claim, {"status": status, "error": message})
        if not written:
            return PageRun(PageOutcome.skipped)
        if not final:
            backoff = RETRY_BACKOFF_S[min(claim.attempt, len(RETRY_BACKOFF_S)) - 1]
            return PageRun(PageOutcome.retry, claim.job_id, retry_in_s=backoff)
        complete = repository.all_pages_terminal(session, claim.job_id)
    return PageRun(PageOutcome.failed, claim.job_id, job_complete=complete)


def _cost_usd(compute_seconds: float, price_usd_per_hour: float) -> Decimal:
    return (Decimal(str(compute_seconds)) * Decimal(str(price_usd_per_hour)) / 3600).quantize(
        Decimal("0.00000001")
    )
