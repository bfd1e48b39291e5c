"""ocr: one page through its engine, Markdown to S3, the result on the page row.

Three kinds of failure, three answers:
- the engine fails on the page: counted on the page, retried with backoff, then
  the page fails with the engine's message;
- storage is unreachable: the claim is kept but its lease is cut to the task's
  retry backoff, so the retry (or, if that message is lost, the reaper) takes the
  page again then; each costs the page one claim;
- the worker dies: the lease runs out and the reaper publishes the page again.
Claims of every kind are capped, so nothing retries forever.

A page that outlives the task time limit counts as an engine failure, "exceeded the
time limit", and is charged the time it held the worker: stopped at the soft limit,
the page records that itself; killed at the hard limit (stuck in C code), the
worker's main process records it (`record_time_limit_kill`). Its next attempt takes
the engine's cheapest reading (worker.stages.budget).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import ParamSpec, TypeVar

from celery.exceptions import SoftTimeLimitExceeded
from sqlalchemy.orm import Session, sessionmaker

from pagemill.accounting.pricing import page_charge
from pagemill.accounting.seconds import attempts_seconds
from pagemill.domain import LicenseUse, PageStatus
from pagemill.jobs import repository
from pagemill.jobs.repository import PageClaim, RunningAttempt
from pagemill.settings import Settings
from pagemill.storage import JobKeys, StorageUnavailable
from worker import registration
from worker.bridge import BridgeClosed
from worker.engines.base import EngineError, EngineResult, PageFacts, PageInput
from worker.engines.registry import get_engine, licence_basis
from worker.engines.router import TEXT_LAYER_ENGINE
from worker.stages.blocks import page_blocks
from worker.stages.budget import (
    TIME_LIMITED,
    fallback_reason,
    shrunk_image,
    time_limit_message,
)
from worker.stages.context import StageContext
from worker.stages.measurements import gpu_measurements
from worker.stages.quality import Assessed, convert_checked

log = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")

# Backoff between engine attempts of a failing page: seconds, by failure count.
ENGINE_RETRY_BACKOFF_S = (2.0, 10.0, 30.0)


class PageOutcome(StrEnum):
    succeeded = "succeeded"
    retry = "retry"  # publish the page again after retry_in_s
    failed = "failed"
    skipped = "skipped"  # done, cancelled or held by another attempt


@dataclass(frozen=True)
class PageRun:
    outcome: PageOutcome
    job_id: uuid.UUID | None = None
    job_complete: bool = False
    retry_in_s: float = 0.0
    engine: str | None = None
    license_use: LicenseUse | None = None


@dataclass(frozen=True)
class _ClaimedPage:
    claim: PageClaim
    engine_name: str
    facts: PageFacts
    image_dpi: int
    image_stored: bool  # False for a page prepare read from its text layer and did not render
    engine_failures: int
    license_use: LicenseUse | None
    fallback: str | None  # why this attempt takes the engine's cheapest reading
    charged_seconds: float  # charged to earlier attempts stopped at the time limit


@dataclass(frozen=True)
class _Basis:
    """The licence this page is processed under, as the page row records it."""

    model: str
    model_license: str
    deployment_license_reference: str | None
    permits_commercial: bool


def run_page(ctx: StageContext, page_id: int, outage_backoff_s: float = 2.0) -> PageRun:
    """Raises StorageUnavailable, with the claim deferred by `outage_backoff_s`, when S3
    cannot be reached."""
    started = time.monotonic()
    claimed = _claim(ctx, page_id)
    if isinstance(claimed, PageRun):
        return claimed
    try:
        return _run_claimed(ctx, claimed, outage_backoff_s, started)
    except SoftTimeLimitExceeded:
        with ctx.sessions.begin() as session:
            attempt = repository.running_attempt(session, claimed.claim)
            return _record_time_limit(session, ctx.settings, attempt)


def _run_claimed(
    ctx: StageContext, claimed: _ClaimedPage, outage_backoff_s: float, started: float
) -> PageRun:
    keys = JobKeys(claimed.claim.job_id)
    basis = _basis(ctx, claimed.engine_name)
    defer = _Deferral(ctx, claimed.claim, outage_backoff_s)
    try:
        _check_licence(claimed, basis)
        page_input = defer.on_outage(_load_page_input, ctx, keys, claimed)
        assessed = convert_checked(
            claimed.engine_name, page_input, _convert, ctx.settings.ocr_engine
        )
        result = assessed.result
    except BridgeClosed:
        # This worker is shutting down: give the page back at once for another.
        with ctx.sessions.begin() as session:
            repository.defer_page(session, claimed.claim, 0, "worker shut down mid-page")
        raise
    except (StorageUnavailable, SoftTimeLimitExceeded):
        raise
    except Exception as error:
        if time.monotonic() - started >= ctx.settings.task_soft_time_limit_s - 1:
            # The soft limit raised inside an engine's native callback can come out wrapped
            # in the engine's own error (onnxruntime's does): past that time, it was the limit.
            # (A second's slack: the task started a moment before this stage did.)
            raise SoftTimeLimitExceeded() from error
        return _record_engine_failure(ctx, claimed, error)
    defer.on_outage(_store_markdown, ctx, keys, claimed.claim, result)
    defer.on_outage(_store_blocks, ctx, keys, claimed, assessed)
    if assessed.engine != claimed.engine_name:
        # Repaired by another engine (a text layer read by OCR): record what really ran.
        basis = _basis(ctx, assessed.engine)
    return _record_success(ctx, claimed, assessed, basis)


def _convert(engine_name: str, page: PageInput) -> EngineResult:
    return get_engine(engine_name).convert(page)


def _basis(ctx: StageContext, engine_name: str) -> _Basis:
    model = licence_basis(engine_name)
    reference = (
        None if model.model_permits_commercial else ctx.settings.commercial_license_reference
    )
    return _Basis(
        model=model.model,
        model_license=model.model_license,
        deployment_license_reference=reference,
        permits_commercial=model.model_permits_commercial or reference is not None,
    )


def _check_licence(page: _ClaimedPage, basis: _Basis) -> None:
    # Routing keeps commercial pages away from workers that may not process them;
    # this is the check at the point of use (and the database has a third).
    if page.license_use is LicenseUse.commercial and not basis.permits_commercial:
        raise EngineError(
            f"{basis.model} is licensed {basis.model_license}, which does not permit "
            "commercial use, and this deployment holds no commercial licence for it."
        )


def _claim(ctx: StageContext, page_id: int) -> _ClaimedPage | PageRun:
    lease = timedelta(seconds=ctx.settings.page_lease_s)
    # One statement that commits on its own: the claim, returning what the attempt reads.
    database = repository.autocommit_driver(ctx.sessions)
    taken = repository.take_page(database, page_id, lease, registration.worker_id())
    if taken is None:
        return PageRun(PageOutcome.skipped)
    claim = taken.claim
    if claim.attempt > ctx.settings.max_claims:
        message = f"Gave up after {claim.attempt - 1} attempts; last error: {taken.error}"
        database = repository.autocommit_driver(ctx.sessions)
        finished = repository.finish_page_counted(
            database, claim, {"status": PageStatus.failed, "error": message}
        )
        if not finished.written:
            return PageRun(PageOutcome.skipped)
        return PageRun(PageOutcome.failed, claim.job_id, job_complete=finished.job_complete)
    engine_name = taken.engine or ctx.settings.ocr_engine
    facts = PageFacts.from_stored(taken.facts)
    return _ClaimedPage(
        claim=claim,
        engine_name=engine_name,
        facts=facts,
        image_dpi=taken.image_dpi or 150,
        image_stored=taken.image_stored,
        engine_failures=taken.engine_failures,
        license_use=taken.license_use,
        fallback=fallback_reason(ctx.settings, engine_name, facts, taken.engine_details),
        charged_seconds=taken.charged_seconds,
    )


def _load_page_input(ctx: StageContext, keys: JobKeys, page: _ClaimedPage) -> PageInput:
    number = page.claim.number
    # A text layer page has no image unless an earlier release of prepare stored one; the
    # checks render it from the one-page PDF if they need pixels (worker.stages.quality).
    image = ctx.store.get_bytes(keys.page_image(number)) if page.image_stored else None
    if page.engine_name == TEXT_LAYER_ENGINE:
        pdf_page = ctx.store.get_bytes(keys.page_pdf(number))
        return PageInput(page.facts, image, page.image_dpi, pdf_page, page.fallback)
    if image is None:
        raise EngineError(f"Page {number} was prepared without an image, so OCR cannot read it.")
    dpi = page.image_dpi
    if page.fallback is not None:
        image, dpi = shrunk_image(image, dpi, ctx.settings.ocr_fallback_max_pixels)
    return PageInput(page.facts, image, dpi, None, page.fallback)


def _store_markdown(
    ctx: StageContext, keys: JobKeys, claim: PageClaim, result: EngineResult
) -> None:
    # The attempt's own key: a redelivery of this attempt overwrites its own object, and no
    # other attempt's (storage.JobKeys.page_markdown).
    markdown_key = keys.page_markdown(claim.number, claim.attempt)
    ctx.store.put_bytes(markdown_key, result.markdown.encode(), "text/markdown")


# Markdown longer than this is not kept on the page's row for finalize (it reads such a
# page from S3): rows stay small whatever a page holds. A page is a few thousand
# characters; a dense one of small print under 20,000.
STAGED_MARKDOWN_MAX_CHARS = 256 * 1024


def stageable_markdown(markdown: str) -> str | None:
    """The Markdown to keep on the page's row, or None: too long, or holding a NUL,
    which Postgres text cannot store."""
    if len(markdown) > STAGED_MARKDOWN_MAX_CHARS or "\x00" in markdown:
        return None
    return markdown


def _store_blocks(ctx: StageContext, keys: JobKeys, page: _ClaimedPage, assessed: Assessed) -> None:
    blocks = page_blocks(assessed, page.facts)
    if blocks is not None:
        body = blocks.model_dump_json(exclude_none=True).encode()
        blocks_key = keys.page_blocks(page.claim.number, page.claim.attempt)
        ctx.store.put_bytes(blocks_key, body, "application/json")


@dataclass(frozen=True)
class _Deferral:
    ctx: StageContext
    claim: PageClaim
    backoff_s: float

    def on_outage(self, operation: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return operation(*args, **kwargs)
        except StorageUnavailable as outage:
            with self.ctx.sessions.begin() as session:
                repository.defer_page(session, self.claim, self.backoff_s, str(outage))
            raise


def _record_success(
    ctx: StageContext, page: _ClaimedPage, assessed: Assessed, basis: _Basis
) -> PageRun:
    claim = page.claim
    result = assessed.result
    worker = registration.worker_id()
    seconds = attempts_seconds(page.charged_seconds, result.device_seconds)
    charge = (worker, result.device_seconds) if worker is not None else None
    # The result, the worker's charge, the purge fence and whether the job is done, in
    # one statement that commits on its own: written after the page's objects, so the
    # fence is checked after they were written, as the purge requires (pagemill.jobs.purge).
    database = repository.autocommit_driver(ctx.sessions)
    finished = repository.finish_page_counted(
        database,
        claim,
        {
            "status": PageStatus.succeeded,
            "engine": assessed.engine,
            **page_charge(ctx.settings, seconds),
            "output_chars": len(result.markdown),
            "staged_markdown": stageable_markdown(result.markdown),
            "result_attempt": claim.attempt,
            "prompt_tokens": result.prompt_tokens,
            "output_tokens": result.output_tokens,
            "finish_reason": result.finish_reason,
            "engine_details": result.details,
            "error": None,
            "worker_id": worker,
            "model": basis.model,
            "model_license": basis.model_license,
            "deployment_license_reference": basis.deployment_license_reference,
            "basis_permits_commercial": basis.permits_commercial,
            **gpu_measurements(result.details),
            **assessed.columns(),
        },
        charge,
    )
    if not finished.written:
        if finished.purge_started:
            _discard_written(ctx, claim)
        else:
            _discard_lost_attempt(ctx, claim)
        log.info("page %s attempt %s lost its claim", claim.page_id, claim.attempt)
        return PageRun(PageOutcome.skipped)
    return PageRun(PageOutcome.succeeded, claim.job_id, job_complete=finished.job_complete)


def _discard_written(ctx: StageContext, claim: PageClaim) -> None:
    """The job is being purged: its listing of the job's objects may have run before
    this attempt wrote its own, so they are removed here."""
    ctx.store.remove_objects(_attempt_objects(claim))
    log.info("job %s is being purged; removed page %s's results", claim.job_id, claim.number)


def _discard_lost_attempt(ctx: StageContext, claim: PageClaim) -> None:
    """This attempt lost the page (its lease ran out and another attempt took it, or the
    job ended): the objects it wrote are nobody's result, so they go. Unless the row names
    this very attempt: a result written once already (a statement whose commit was not
    heard) is the page's, and stays."""
    with repository.autocommit(ctx.sessions) as session:
        if repository.page_result_attempt(session, claim.page_id) == claim.attempt:
            return
    try:
        ctx.store.remove_objects(_attempt_objects(claim))
    except StorageUnavailable:
        # Left for the job's purge, which removes everything under its prefix.
        log.warning("could not remove page %s attempt %s's objects", claim.page_id, claim.attempt)


def _attempt_objects(claim: PageClaim) -> list[str]:
    keys = JobKeys(claim.job_id)
    return [
        keys.page_markdown(claim.number, claim.attempt),
        keys.page_blocks(claim.number, claim.attempt),
    ]


def _record_engine_failure(ctx: StageContext, page: _ClaimedPage, error: Exception) -> PageRun:
    claim = page.claim
    message = str(error) if isinstance(error, EngineError) else f"{type(error).__name__}: {error}"
    failures = page.engine_failures + 1
    final = failures >= ctx.settings.page_max_attempts
    log.warning("page %s attempt %s failed: %s", claim.page_id, claim.attempt, message)
    status = PageStatus.failed if final else PageStatus.queued
    database = repository.autocommit_driver(ctx.sessions)
    finished = repository.finish_page_counted(
        database, claim, {"status": status, "error": message, "engine_failures": failures}
    )
    if not finished.written:
        return PageRun(PageOutcome.skipped)
    if not final:
        backoff = ENGINE_RETRY_BACKOFF_S[min(failures, len(ENGINE_RETRY_BACKOFF_S)) - 1]
        return PageRun(
            PageOutcome.retry,
            claim.job_id,
            retry_in_s=backoff,
            engine=page.engine_name,
            license_use=page.license_use,
        )
    return PageRun(PageOutcome.failed, claim.job_id, job_complete=finished.job_complete)


def record_time_limit_kill(
    sessions: sessionmaker[Session], settings: Settings, page_id: int
) -> PageRun:
    """Called by the worker's main process when a pool child running this page was
    killed at the hard time limit, so the child could record nothing itself.

    The attempt is the page's running claim taken by this worker within the time limit:
    a page lease outlasts the time limit, so no other attempt can have claimed the page
    meanwhile, unless this report comes late (the worker cut off from the database past
    the lease), and then the page names another worker and the report changes nothing.
    """
    # A second of slack for the clocks of this process and of Postgres.
    within = timedelta(seconds=settings.task_time_limit_s + 1)
    with sessions.begin() as session:
        attempt = repository.running_attempt_since(
            session, page_id, within, registration.worker_id()
        )
        if attempt is None:
            return PageRun(PageOutcome.skipped)
        return _record_time_limit(session, settings, attempt)


LOST_PROCESS_MESSAGE = "the worker process reading the page died"


def release_lost_attempt(sessions: sessionmaker[Session], settings: Settings, page_id: int) -> bool:
    """Called by the worker's main process when the pool child running this page died
    (the kernel's OOM killer, a crash in native code): nothing will finish the attempt,
    so its claim lapses now, and the page's message, which goes back to the queue, or
    else the reaper takes the page again at once rather than when the lease would have
    run out. The attempt still counts against the page's claims, so a page that kills
    every process reading it ends failed. True when a claim was let go.

    Found as `record_time_limit_kill` finds it: this worker's claim of the page, made
    within the time limit."""
    within = timedelta(seconds=settings.task_time_limit_s + 1)
    with sessions.begin() as session:
        attempt = repository.running_attempt_since(
            session, page_id, within, registration.worker_id()
        )
        if attempt is None:
            return False
        repository.defer_page(session, attempt.claim, 0, LOST_PROCESS_MESSAGE)
    log.warning("page %s attempt %s: %s", page_id, attempt.claim.attempt, LOST_PROCESS_MESSAGE)
    return True


def _record_time_limit(
    session: Session, settings: Settings, attempt: RunningAttempt | None
) -> PageRun:
    """An engine failure with its reason, charged for the time the attempt held the worker."""
    if attempt is None:
        return PageRun(PageOutcome.skipped)
    claim = attempt.claim
    failures = attempt.engine_failures + 1
    final = failures >= settings.page_max_attempts
    message = f"Page {claim.number} {time_limit_message(settings)}"
    log.warning("page %s attempt %s: %s", claim.page_id, claim.attempt, message)
    seconds = attempts_seconds(attempt.charged_seconds, attempt.elapsed_seconds)
    finished = repository.finish_page_counted(
        session,
        claim,
        {
            "status": PageStatus.failed if final else PageStatus.queued,
            "error": message,
            "engine_failures": failures,
            "engine_details": {
                **attempt.engine_details,
                TIME_LIMITED: int(attempt.engine_details.get(TIME_LIMITED, 0)) + 1,
            },
            **page_charge(settings, seconds),
        },
    )
    if not finished.written:
        return PageRun(PageOutcome.skipped)
    if not final:
        return PageRun(
            PageOutcome.retry,
            claim.job_id,
            retry_in_s=ENGINE_RETRY_BACKOFF_S[min(failures, len(ENGINE_RETRY_BACKOFF_S)) - 1],
            engine=attempt.engine,
            license_use=attempt.license_use,
        )
    return PageRun(PageOutcome.failed, claim.job_id, job_complete=finished.job_complete)
