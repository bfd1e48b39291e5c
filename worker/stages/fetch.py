"""prepare's first step for a document given by URL: fetch it (pagemill.documents.fetch),
open it in a sandboxed child to learn its type and pages, check the page selection
against it, store it as the job's source and record its facts on the job.

A fetch that fails ends the job with the fetch's code (source_unreachable,
source_too_large, unsupported_type) and stores nothing; so does a document the
sandboxed inspection refuses, with the code an upload would have had.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.orm import Session

from pagemill.clients import quotas
from pagemill.clients.repository import lock_client
from pagemill.documents.fetch import SOURCE_UNREACHABLE, FetchFailed, fetch_source
from pagemill.documents.kinds import CONTENT_TYPES
from pagemill.documents.pagerange import PageRangeError, parse_page_selection
from pagemill.documents.sandbox import DocumentVerdict, Limits, run_sandboxed
from pagemill.documents.source_url import InvalidSourceUrl, parse_source_url
from pagemill.domain import JobStatus, SourceKind
from pagemill.jobs import lifecycle, repository
from pagemill.storage import JobKeys
from worker.stages.context import StageContext

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FetchedDocument:
    kind: SourceKind
    document_pages: int


class _Refused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def fetch_job_source(
    ctx: StageContext,
    job_id: uuid.UUID,
    attempt: int,
    source_url: str,
    page_selection: str | None,
    destination: Path,
) -> FetchedDocument | None:
    """The fetched document's type and page count, stored and recorded; None when the
    job has ended here, or this attempt lost its claim. A sandbox that crashed or was
    starved raises SandboxFailed, for prepare to count like a render failure."""
    try:
        document = _fetch_and_check(ctx, source_url, page_selection, destination)
    except _Refused as refused:
        log.info("job %s: source not used: %s", job_id, refused.message)
        with ctx.sessions.begin() as session:
            lifecycle.end_job(session, job_id, JobStatus.failed, refused.code, refused.message)
        return None
    size_bytes, sha256, restricted, pages_total = document.facts
    source_key = JobKeys(job_id).source
    ctx.store.put_file(source_key, destination, CONTENT_TYPES[document.kind])
    # The quota's check and the pages it counts are one transaction, under the lock.
    with ctx.sessions.begin() as session:
        over_quota = _over_quota(ctx, session, job_id, pages_total)
        if over_quota is None:
            recorded = repository.record_fetched_source(
                session,
                job_id,
                attempt,
                kind=document.kind,
                size_bytes=size_bytes,
                sha256=sha256,
                extraction_restricted=restricted,
                document_pages=document.page_count,
                pages_total=pages_total,
            )
        else:
            code, message = over_quota.code, over_quota.message
            lifecycle.end_job(session, job_id, JobStatus.failed, code, message)
    if over_quota is not None:
        log.info("job %s: source not used: %s", job_id, over_quota.message)
        ctx.store.remove_objects([source_key])
        return None
    if not recorded:
        return None
    return FetchedDocument(document.kind, document.page_count)


def _over_quota(
    ctx: StageContext, session: Session, job_id: uuid.UUID, pages: int
) -> quotas.QuotaExceeded | None:
    """Whether the fetched pages would take the client past a page quota. A job by URL
    has no pages to count at submit, so its quota is checked here, under the client's
    lock as a submission's is; the lock is held until the caller's transaction ends, in
    which the job either ends refused or records its pages."""
    job = repository.get_job(session, job_id)
    if job is None:
        return None
    client = lock_client(session, job.client_id)
    if client is None:
        return None
    try:
        quotas.check_pages(session, ctx.settings, client, pages, lock=False)
    except quotas.QuotaExceeded as exceeded:
        return exceeded
    return None


@dataclass(frozen=True)
class _Checked:
    kind: SourceKind
    page_count: int
    facts: tuple[int, str, bool, int]  # bytes, sha256, extraction restricted, pages selected


def _fetch_and_check(
    ctx: StageContext, source_url: str, page_selection: str | None, destination: Path
) -> _Checked:
    settings = ctx.settings
    try:
        source = parse_source_url(source_url, settings.source_readable_buckets)
        fetched = fetch_source(source, destination, settings)
    except InvalidSourceUrl as invalid:
        # Accepted at submit; the deployment has stopped reading that bucket since.
        raise _Refused(SOURCE_UNREACHABLE, invalid.message) from None
    except FetchFailed as failed:
        raise _Refused(failed.code, failed.message) from None
    limits = Limits(
        settings.sandbox_memory_bytes, settings.sandbox_cpu_s, settings.inspect_timeout_s
    )
    args = [str(destination), str(settings.max_page_side_pt), str(settings.max_image_pixels)]
    try:
        [line] = list(run_sandboxed("pagemill.documents.inspect_child", args, limits))
    except DocumentVerdict as verdict:
        raise _Refused(verdict.code, verdict.message) from None
    page_count = int(line["page_count"])
    try:
        selected = len(parse_page_selection(page_selection, page_count))
    except PageRangeError as error:
        raise _Refused("invalid_page_range", str(error)) from None
    if selected > settings.max_pages:
        raise _Refused(
            "too_many_pages",
            f"The job selects {selected} pages; the limit is {settings.max_pages}.",
        )
    facts = (fetched.size_bytes, fetched.sha256, bool(line["extraction_restricted"]), selected)
    return _Checked(SourceKind(line["kind"]), page_count, facts)
