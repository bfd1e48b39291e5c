"""Submitting and cancelling jobs: what the API and the CLI do, without HTTP."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, BinaryIO

from sqlalchemy.orm import Session

from pagemill.accounting.quote import quote_usd
from pagemill.clients import quotas
from pagemill.db.models import Client, Job
from pagemill.documents.inspect import CONTENT_TYPES, DocumentInfo
from pagemill.documents.pagerange import (
    PageRangeError,
    canonical_page_selection,
    parse_page_selection,
)
from pagemill.documents.source_url import InvalidSourceUrl, parse_source_url
from pagemill.domain import InputRejected, JobStatus, LicenseUse, human_size
from pagemill.engines.catalog import (
    ENGINE_CHOICES,
    GPU_ENGINES,
    LICENCE_GATED_ENGINES,
    OCR_ENGINES,
    TEXT_LAYER_ENGINE,
)
from pagemill.jobs import idempotency, metadata, result_cache
from pagemill.quality.furniture import FurnitureMode
from pagemill.settings import Settings
from pagemill.storage import JobKeys, ObjectStore
from pagemill.webhooks import ssrf
from pagemill.webhooks.urls import InvalidWebhookUrl, validate_webhook_url
from pagemill.workers import registry as workers

log = logging.getLogger(__name__)


class SubmissionRejected(InputRejected):
    """A submission that cannot become a job: the file, or the options sent with it."""


@dataclass(frozen=True)
class SavedUpload:
    path: Path
    size_bytes: int
    sha256: str
    filename: str | None


@dataclass(frozen=True)
class SubmitOptions:
    pages: str | None = None
    license_use: LicenseUse | None = None
    webhook_url: str | None = None
    engine: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    max_cost_usd: Decimal | None = None
    furniture: FurnitureMode = FurnitureMode.separate
    # False: run the job even if the result cache holds its result (pagemill.jobs.result_cache).
    cache: bool = True
    # "invoice": also read the invoice's data into invoice.json (pagemill.invoices).
    extract: str | None = None


# Options added after idempotency keys were first stored count only when set, so a
# retry of a request sent before an option existed still matches its key.
OPTIONS_ADDED_LATER = ("furniture", "cache", "extract")


def request_fingerprint(
    upload_sha256: str,
    options: SubmitOptions,
    filename: str | None,
    settings: Settings,
    client: Client,
) -> str:
    """What an Idempotency-Key is bound to: the file and the request as it will run.

    An option sent with the value it would default to counts as not sent, and the
    pages and budget count by value ("2,1" is "1-2", 5.00 is 5): a client that always
    sends its defaults, or spells a range another way, matches its own retry."""
    fields = {
        **dataclasses.asdict(options),
        "filename": filename,
        "pages": canonical_page_selection(options.pages),
        "max_cost_usd": None
        if options.max_cost_usd is None
        else format(options.max_cost_usd.normalize(), "f"),
    }
    applied_defaults = {
        "engine": settings.default_engine,
        "license_use": client.default_license_use,
        "furniture": FurnitureMode.separate,
        "cache": True,
    }
    for name, default in applied_defaults.items():
        if fields[name] == default:
            fields[name] = None
    for name in OPTIONS_ADDED_LATER:
        if fields[name] is None:
            del fields[name]
    return idempotency.fingerprint(upload_sha256, fields)


def save_upload(
    stream: BinaryIO, destination: Path, max_bytes: int, filename: str | None
) -> SavedUpload:
    """Copy an upload to disk in chunks, hashing and counting as it goes; stops at the cap."""
    digest = hashlib.sha256()
    size = 0
    with destination.open("wb") as out:
        while chunk := stream.read(1024 * 1024):
            size += len(chunk)
            if size > max_bytes:
                raise SubmissionRejected(
                    "file_too_large",
                    f"The file is larger than the {human_size(max_bytes)} limit.",
                    413,
                )
            digest.update(chunk)
            out.write(chunk)
    return SavedUpload(destination, size, digest.hexdigest(), filename)


def parse_metadata(raw: str | None) -> dict[str, Any]:
    try:
        return metadata.parse_metadata(raw)
    except metadata.MetadataRejected as rejected:
        raise SubmissionRejected(rejected.code, rejected.message) from None


def check_page_selection(raw: str | None) -> str | None:
    """The selection as given, stripped, if it is well formed; whether it fits the
    document is known only after inspection."""
    try:
        canonical_page_selection(raw)
    except PageRangeError as error:
        raise SubmissionRejected("invalid_page_range", str(error)) from None
    return raw.strip() if raw and raw.strip() else None


def parse_furniture(raw: str | None) -> FurnitureMode:
    if raw is None or not raw.strip():
        return FurnitureMode.separate
    try:
        return FurnitureMode(raw.strip())
    except ValueError:
        raise SubmissionRejected(
            "invalid_furniture",
            "The furniture field must be one of "
            f"{', '.join(mode.value for mode in FurnitureMode)}.",
        ) from None


EXTRACT_CHOICES = ("invoice",)


def parse_extract(raw: str | None) -> str | None:
    if raw is None or not raw.strip():
        return None
    if raw.strip() not in EXTRACT_CHOICES:
        raise SubmissionRejected(
            "invalid_extract", f"The extract field must be {', '.join(EXTRACT_CHOICES)}."
        )
    return raw.strip()


def given_by_url(has_file: bool, source_url: str | None) -> bool:
    """Whether a submission names its document by URL; refuses both a file and a URL,
    and neither, so that what the job converts is never a guess."""
    has_url = source_url is not None and source_url.strip() != ""
    if has_file and has_url:
        raise SubmissionRejected(
            "file_and_source_url", "Send either a file or a source_url, not both."
        )
    if not has_file and not has_url:
        raise SubmissionRejected(
            "no_document", "Send the document as a file, or name it with source_url."
        )
    return has_url


def check_source_url(url: str, settings: Settings) -> str:
    """The source_url to store, if its form is one the worker's fetch can use and it
    does not name an internal address the fetch would refuse."""
    try:
        source = parse_source_url(url, settings.source_readable_buckets)
    except InvalidSourceUrl as invalid:
        raise SubmissionRejected(invalid.code, invalid.message) from None
    if source.bucket is None:  # https; an s3:// source is read with the S3 client
        _refuse_internal_address(
            source.url, "source_url", "invalid_source_url", settings.source_fetch_allowed_hosts
        )
    return source.url


def check_webhook_url(url: str | None, settings: Settings) -> str | None:
    """The URL to store, by the same check delivery makes before every attempt, so a
    URL accepted here is one an attempt can send to. Blank means no webhook."""
    if url is None or not url.strip():
        return None
    try:
        checked = validate_webhook_url(url)
    except InvalidWebhookUrl as invalid:
        raise SubmissionRejected("invalid_webhook_url", invalid.message) from invalid
    _refuse_internal_address(
        checked,
        "webhook_url",
        "invalid_webhook_url",
        settings.webhook_allowed_hosts,
        settings.webhook_allowed_cidrs,
    )
    return checked


def _refuse_internal_address(
    url: str,
    field_name: str,
    code: str,
    allowed_hosts: Sequence[str],
    allowed_cidrs: Sequence[str] = (),
) -> None:
    """Refuse a URL written with an address that delivery or fetch would refuse at every
    attempt (metadata, loopback, private, link-local...). A host name is not looked up
    here: what it resolves to is checked when it is used, as DNS may change by then."""
    refused = ssrf.literal_address_refusal(url, allowed_hosts, allowed_cidrs)
    if refused is None:
        return
    address, reason = refused
    if reason.startswith(ssrf.METADATA):
        rule = "which is never allowed"
    else:
        rule = "which this deployment does not connect to; use a public address"
    raise SubmissionRejected(code, f"The {field_name} points at {address}, {reason}, {rule}.")


# Longer names are cut: a name is kept to show the caller, and a client rarely
# chooses it (users name their files).
MAX_FILENAME_CHARS = 255


def shown_filename(name: str | None) -> str | None:
    """The upload's name as the job keeps it: control characters (NUL cannot be
    stored) removed, cut to MAX_FILENAME_CHARS."""
    if name is None:
        return None
    kept = "".join(char for char in name if ord(char) >= 0x20 and ord(char) != 0x7F)
    return kept[:MAX_FILENAME_CHARS] or None


def submit_job(
    session: Session,
    store: ObjectStore,
    settings: Settings,
    client: Client,
    upload: SavedUpload,
    options: SubmitOptions,
    info: DocumentInfo,
) -> Job:
    """Check the options against the inspected upload (`info`, from `inspect_untrusted`),
    store it and record the job (not yet committed, not yet published).

    The source is stored before the row exists, so a job never points at a missing
    file. Whatever fails here after that removes the object again; whatever fails in
    the caller before its commit is through must remove it too
    (`discard_source_after_failure`), or it stays in the bucket with no job to purge it.
    """
    job = plan_job(session, settings, client, upload, options, info)
    hit = None
    if options.cache and job.cache_key is not None:
        hit = result_cache.find_hit(session, settings, client.id, job.cache_key)
    if hit is None:
        # Refused before the upload is stored; exactly, under the lock, after.
        quotas.check_pages(session, settings, client, job.pages_total or 0, lock=False)
    # End the read-only transaction of the checks above (nothing is pending yet), so
    # no connection waits idle in it while the source is copied to object storage.
    session.commit()
    store_source(store, job.id, upload, info)
    try:
        if hit is not None and result_cache.reuse(session, store, job, hit):
            return job
        quotas.check_pages(session, settings, client, job.pages_total or 0, lock=True)
        session.add(job)
        session.flush()
    except Exception:
        # Refused by the quota, or the row could not be written: no job will point at
        # what was stored.
        session.rollback()
        discard_source_after_failure(store, job.id)
        raise
    return job


def submit_url_job(
    session: Session, settings: Settings, client: Client, source_url: str, options: SubmitOptions
) -> Job:
    """Record a job whose document the worker fetches from `source_url` (not yet
    committed, not yet published); nothing is stored until the fetch succeeds."""
    job = plan_url_job(session, settings, client, source_url, options)
    session.add(job)
    session.flush()
    return job


def source_url_sha256(source_url: str) -> str:
    """What an Idempotency-Key binds a job by URL to, in place of the file's digest."""
    return hashlib.sha256(f"source_url:{source_url}".encode()).hexdigest()


def store_source(
    store: ObjectStore, job_id: uuid.UUID, upload: SavedUpload, info: DocumentInfo
) -> None:
    store.put_file(JobKeys(job_id).source, upload.path, CONTENT_TYPES[info.kind])


def check_engine(engine: str | None) -> str | None:
    """The engine asked for, if this service has it; None leaves the default."""
    if engine is not None and engine not in ENGINE_CHOICES:
        raise SubmissionRejected(
            "invalid_engine", f"The engine must be one of {', '.join(ENGINE_CHOICES)}."
        )
    return engine


def _checked_engine(options: SubmitOptions, settings: Settings) -> str:
    engine = options.engine or settings.default_engine
    check_engine(engine)
    return engine


def plan_url_job(
    session: Session, settings: Settings, client: Client, source_url: str, options: SubmitOptions
) -> Job:
    """The job for a document the worker will fetch (`source_url`, checked by
    `check_source_url`), not yet added to the session. What depends on the document
    (its pages, their range, the quote) is known only after the fetch, so a budget
    cannot be checked here and is refused rather than ignored."""
    engine = _checked_engine(options, settings)
    if options.max_cost_usd is not None:
        raise SubmissionRejected(
            "max_cost_needs_upload",
            "max_cost_usd needs the document's quote at submit; a source_url is fetched "
            "later, so upload the file to set a budget.",
        )
    license_use = options.license_use or client.default_license_use
    ocr_engine = engine if engine in OCR_ENGINES else settings.ocr_engine
    _check_gpu_capacity(session, settings, engine, ocr_engine)
    _check_licensed_capacity(session, settings, license_use, engine, ocr_engine)
    return Job(
        id=uuid.uuid4(),
        client_id=client.id,
        status=JobStatus.queued,
        license_use=license_use,
        engine=engine,
        webhook_url=options.webhook_url,
        caller_metadata=options.metadata,
        source_url=source_url,
        page_selection=options.pages.strip() if options.pages else None,
        furniture=options.furniture.value,
        extract=options.extract,
    )


def plan_job(
    session: Session,
    settings: Settings,
    client: Client,
    upload: SavedUpload,
    options: SubmitOptions,
    info: DocumentInfo,
) -> Job:
    """Every check of `submit_job`, and the job it would record, not yet added to the
    session; nothing is stored."""
    engine = _checked_engine(options, settings)
    try:
        numbers = parse_page_selection(options.pages, info.page_count)
    except PageRangeError as error:
        raise SubmissionRejected("invalid_page_range", str(error)) from None
    if len(numbers) > settings.max_pages:
        raise SubmissionRejected(
            "too_many_pages",
            f"The job selects {len(numbers)} pages; the limit is {settings.max_pages}.",
        )
    license_use = options.license_use or client.default_license_use
    ocr_engine = engine if engine in OCR_ENGINES else settings.ocr_engine
    _check_gpu_capacity(session, settings, engine, ocr_engine)
    _check_licensed_capacity(session, settings, license_use, engine, ocr_engine)
    quote = quote_usd(session, settings, info, numbers, engine, ocr_engine)
    if options.max_cost_usd is not None and quote > options.max_cost_usd:
        raise SubmissionRejected(
            "over_budget",
            f"The quote for {len(numbers)} pages is ${quote:.6f}, above max_cost_usd "
            f"${options.max_cost_usd}.",
        )
    return Job(
        id=uuid.uuid4(),
        client_id=client.id,
        status=JobStatus.queued,
        license_use=license_use,
        quote_usd=quote,
        max_cost_usd=options.max_cost_usd,
        engine=engine,
        webhook_url=options.webhook_url,
        caller_metadata=options.metadata,
        source_filename=shown_filename(upload.filename),
        source_kind=info.kind,
        source_bytes=upload.size_bytes,
        source_sha256=upload.sha256,
        source_extraction_restricted=info.extraction_restricted,
        document_pages=info.page_count,
        page_selection=options.pages.strip() if options.pages else None,
        pages_total=len(numbers),
        furniture=options.furniture.value,
        extract=options.extract,
        # A cached result holds no invoice.json unless its job asked for one: not reused.
        cache_key=None
        if options.extract
        else result_cache.cache_key(
            upload.sha256, engine, settings, options.pages, options.furniture.value, license_use
        ),
    )


def _check_gpu_capacity(session: Session, settings: Settings, engine: str, ocr_engine: str) -> None:
    """Refuse at submit, not by queueing forever, a job for a GPU engine that no live
    worker runs. Workers that vanish later are the reaper's (gpu_worker_wait_s)."""
    if ocr_engine not in GPU_ENGINES or engine == TEXT_LAYER_ENGINE:
        return
    dead_after = timedelta(seconds=settings.worker_dead_after_s)
    if not any(w.engine == ocr_engine for w in workers.live_workers(session, dead_after)):
        raise SubmissionRejected(
            "no_gpu_worker",
            f"No GPU worker running the {ocr_engine} engine is alive, so nothing could read "
            "this job's pages. Choose another engine, or try again once the operator has "
            "started one.",
            409,
        )


def _check_licensed_capacity(
    session: Session,
    settings: Settings,
    license_use: LicenseUse,
    engine: str,
    ocr_engine: str,
) -> None:
    """Refuse at submit, not by queueing forever, a commercial job that no live worker
    may process. Only a page that needs OCR can reach the licence-gated engine."""
    if license_use is not LicenseUse.commercial:
        return
    gated = ocr_engine in LICENCE_GATED_ENGINES and engine != TEXT_LAYER_ENGINE
    if not gated:
        return
    dead_after = timedelta(seconds=settings.worker_dead_after_s)
    if not workers.can_serve_commercially(session, ocr_engine, dead_after):
        raise SubmissionRejected(
            "no_licensed_worker",
            f"No running worker may process commercial documents with the {ocr_engine} "
            "engine: its model's licence forbids commercial use and no worker holds a "
            "commercial licence. Submit it as non_commercial, choose another engine, or "
            "contact the operator.",
            409,
        )


def discard_source(store: ObjectStore, job_id: uuid.UUID) -> None:
    keys = JobKeys(job_id)
    # The source by its key: a listing made a moment after the upload may not show it
    # yet. Then whatever else is under the job (a cache hit's copied results).
    store.remove_objects([keys.source])
    store.delete_prefix(keys.prefix + "/")


def discard_source_after_failure(store: ObjectStore, job_id: uuid.UUID) -> None:
    """`discard_source` for a submission that is failing already: its own error is the
    one to report, so a failure to remove the object is logged, with the key to remove."""
    try:
        discard_source(store, job_id)
    except Exception:
        log.exception("could not remove %s/ of a job that was not recorded", JobKeys(job_id).prefix)
