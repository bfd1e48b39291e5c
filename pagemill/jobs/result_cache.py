"""The result cache: a document sent again, with the same options, reuses its result.

Two submissions give the same result when the source bytes (sha256), the options that
shape the output (page selection, engine, the OCR engine `auto` falls back to, furniture
mode, licence use) and the version of the result format are the same: `cache_key` is a
digest of those, stored on every job. A later job with that key, of the same client (one
client's document must never reveal another's), reuses the newest succeeded, unpurged one,
provided each of its pages was read by the model its engine runs now (for the vLLM engine,
its profile, as the live workers registered it).

A hit runs no engine and is charged nothing: its objects are copied inside the bucket, its
page rows are copied with zero device seconds and cost (device kind `cache`, so the ops
views keep cache hits apart), and the job ends succeeded at once, saying `cached_from`.
Everything lives in Postgres and S3, so a hit survives restarts. The copy is the new job's
own: purging either job leaves the other whole.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from minio.error import S3Error
from sqlalchemy import func, inspect
from sqlalchemy.orm import Session

from pagemill.db.models import Job, Page
from pagemill.documents.pagerange import canonical_page_selection
from pagemill.domain import JobStatus, LicenseUse, PageStatus
from pagemill.engines import catalog
from pagemill.jobs import lifecycle, repository
from pagemill.jobs.summaries import build_manifest, manifest_json
from pagemill.settings import Settings
from pagemill.storage import JobKeys, ObjectStore, StorageUnavailable
from pagemill.workers import registry as workers

log = logging.getLogger(__name__)

# The version of what a job stores for the same input. Raise it with any change to
# prepare, the engines' layout or finalize that changes the Markdown of a page, so that
# results made before are no longer reused.
RESULT_FORMAT = 1

# The device kind of a page copied from the cache: no device read it.
CACHE_DEVICE_KIND = "cache"

# Page columns that describe running it, not what it holds: a copy has none of them.
_NOT_COPIED = {"id", "job_id", "created_at", "updated_at"}
_RUN_COLUMNS: dict[str, Any] = {
    "attempts": 0,
    "engine_failures": 0,
    "lease_expires_at": None,
    "started_at": None,
    "wall_seconds": None,
    "device_seconds": 0.0,
    "cost_usd": Decimal(0),
    "device_kind": CACHE_DEVICE_KIND,
    "worker_id": None,
    "price_usd_per_hour": None,
    "prompt_tokens": None,
    "output_tokens": None,
    "queue_seconds": None,
    "prefill_seconds": None,
    "decode_seconds": None,
    "spec_steps": None,
    "spec_draft_tokens": None,
    "spec_accepted_tokens": None,
}


def cache_key(
    source_sha256: str,
    engine: str,
    settings: Settings,
    pages: str | None,
    furniture: str,
    license_use: LicenseUse,
) -> str:
    fields = {
        "format": RESULT_FORMAT,
        "source_sha256": source_sha256,
        "engine": engine,
        # What `auto` reads pages without a usable text layer with.
        "ocr_engine": settings.ocr_engine,
        "pages": canonical_page_selection(pages),
        "furniture": furniture,
        # A commercial job may need another worker (a licence-gated model) than a
        # non-commercial one, and its pages record the basis they ran under.
        "license_use": license_use.value,
    }
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class CacheHit:
    source: Job
    pages: list[Page]


def find_hit(
    session: Session, settings: Settings, client_id: uuid.UUID, key: str
) -> CacheHit | None:
    source = repository.latest_cached_candidate(session, client_id, key)
    if source is None:
        return None
    pages = repository.list_pages(session, source.id)
    if len(pages) != source.pages_total or any(p.status is not PageStatus.succeeded for p in pages):
        return None
    for page in pages:
        if page.engine is None or page.model not in current_models(session, settings, page.engine):
            log.info("job %s not reused: page %s was read by another model", source.id, page.number)
            return None
    return CacheHit(source, pages)


def current_models(session: Session, settings: Settings, engine: str) -> set[str]:
    """The models `engine` reads pages with now: the catalogue's, or for an engine whose
    model is configured per worker (vLLM profiles), those of its live workers."""
    try:
        spec = catalog.engine_spec(engine)
    except ValueError:
        return set()
    if isinstance(spec.licence, catalog.LicenceBasis):
        return {spec.licence.model}
    dead_after = timedelta(seconds=settings.worker_dead_after_s)
    return {w.model for w in workers.live_workers(session, dead_after) if w.engine == engine}


def reuse(session: Session, store: ObjectStore, job: Job, hit: CacheHit) -> bool:
    """Give `job` (not yet added to the session; its source already stored) the result of
    `hit.source`, and end it succeeded. False, with nothing left behind, when the earlier
    job's objects are gone: a purge began meanwhile."""
    copied: list[str] = []
    try:
        pages = _copy_objects(store, hit, job.id, copied)
        manifest_key = JobKeys(job.id).manifest
        manifest = build_manifest(job, pages)
        store.put_bytes(manifest_key, manifest_json(manifest), "application/json")
        copied.append(manifest_key)
        # FOR SHARE until commit: the earlier job's purge cannot begin before this job is
        # recorded, so a purge that began before this point shows here.
        if not repository.hold_unpurged(session, hit.source.id):
            raise LookupError(f"job {hit.source.id} is being purged")
    except (LookupError, S3Error, StorageUnavailable):
        log.info("job %s: the cached result of %s is gone; running it", job.id, hit.source.id)
        session.rollback()
        if copied:
            store.remove_objects(copied)
        return False
    job.status = JobStatus.running
    job.started_at = func.now()  # the transaction's time, as finished_at will be
    job.cached_from = hit.source.id
    job.quote_usd = Decimal(0)
    session.add(job)
    session.flush()
    session.add_all(pages)
    session.flush()
    lifecycle.end_job(session, job.id, JobStatus.succeeded)
    return True


def _copy_objects(
    store: ObjectStore, hit: CacheHit, job_id: uuid.UUID, copied: list[str]
) -> list[Page]:
    """Copy every object of the earlier job but its source (the new job stored its own)
    and its manifest (which names its job); returns the new page rows."""
    old_keys, new_prefix = JobKeys(hit.source.id), JobKeys(job_id).prefix
    old_prefix = old_keys.prefix + "/"
    skipped = {old_keys.source, old_keys.manifest}
    objects = [item.key for item in store.list_objects(old_prefix) if item.key not in skipped]
    if old_keys.document not in objects:
        raise LookupError(f"job {hit.source.id} has no document")
    for old in objects:
        new = f"{new_prefix}/{old[len(old_prefix) :]}"
        store.copy_object(old, new)
        copied.append(new)
    return [_copied_page(page, job_id, hit.source.id) for page in hit.pages]


def _copied_page(page: Page, job_id: uuid.UUID, source_job_id: uuid.UUID) -> Page:
    values: dict[str, Any] = {
        attr.key: getattr(page, attr.key)
        for attr in inspect(Page).column_attrs
        if attr.key not in _NOT_COPIED
    }
    values.update(_RUN_COLUMNS)
    values.update(
        job_id=job_id,
        finished_at=datetime.now(UTC),
        engine_details={**(page.engine_details or {}), "cached_from": str(source_job_id)},
    )
    return Page(**values)
