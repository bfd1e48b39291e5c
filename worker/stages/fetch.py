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
    ctx.store.put_file(JobKeys(job_id).source, destination, CONTENT_TYPES[document.kind])
    with ctx.sessions.begin() as session:
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
    if not recorded:
        return None
    return FetchedDocument(document.kind, document.page_count)


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
