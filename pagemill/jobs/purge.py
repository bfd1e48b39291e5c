"""Purging a job: its source, page images and results leave object storage, its row stays.

The row keeps the job's pages with their cost and licence basis: the audit trail outlives
the data. A purge runs in three steps, each safe to repeat:

1. the fence: `jobs.purged_at` is set and committed (only on a job that has ended);
2. every object under the job's prefix is listed and removed;
3. the job's status becomes `purged`.

The fence is what keeps a purge final while workers still hold the job's work (a page
whose OCR was under way when the job was cancelled, a finalize mid-write). A worker
writes an object and only then checks the fence (`discard_if_purged`), removing what it
wrote if the fence is up. Either its write finished before step 2 listed the prefix, and
step 2 removes it, or it finished after, when the fence was already committed, and the
worker's check sees it. Results are refused (410) from step 1 on.

A purge that stopped between the steps (an outage, a process that died) is finished by
the reaper (`finish_unfinished`), as are jobs past their client's retention
(`purge_expired`).
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy.orm import Session, sessionmaker

from pagemill.jobs import repository
from pagemill.settings import Settings
from pagemill.storage import JobKeys, ObjectStore

log = logging.getLogger(__name__)

# Jobs one reaper pass purges: the rest wait for the next pass, so a backlog (retention
# shortened, say) is worked off steadily without holding the reaper for long.
PURGE_BATCH = 100


class JobNotEnded(Exception):
    """Only an ended job can be purged: cancel it first."""


@dataclass
class PurgeReport:
    job_id: uuid.UUID
    objects: int = 0
    bytes: int = 0
    # Objects removed by kind: source, page_image, page_pdf, page_markdown, page_blocks,
    # document, manifest, other.
    by_kind: dict[str, int] = field(default_factory=dict)


def object_kind(relative_key: str) -> str:
    """What a key under a job's prefix holds (pagemill.storage.JobKeys)."""
    if relative_key == "source":
        return "source"
    if relative_key == "document.md":
        return "document"
    if relative_key == "manifest.json":
        return "manifest"
    if relative_key.startswith("pages/"):
        suffix = relative_key.rsplit(".", 1)[-1]
        kinds = {
            "png": "page_image",
            "pdf": "page_pdf",
            "md": "page_markdown",
            "json": "page_blocks",
        }
        return kinds.get(suffix, "other")
    return "other"


def remove_objects(store: ObjectStore, job_id: uuid.UUID) -> PurgeReport:
    """Step 2: remove every object of the job and say what they were."""
    prefix = JobKeys(job_id).prefix + "/"
    found = store.list_objects(prefix)
    if found:
        store.remove_objects([item.key for item in found])
    kinds = Counter(object_kind(item.key[len(prefix) :]) for item in found)
    return PurgeReport(
        job_id=job_id,
        objects=len(found),
        bytes=sum(item.size_bytes for item in found),
        by_kind=dict(sorted(kinds.items())),
    )


def purge_job(session: Session, store: ObjectStore, job_id: uuid.UUID) -> PurgeReport:
    """Purge an ended job now. Commits the fence before touching storage. Purging a job
    purged already removes whatever is left (nothing, normally) and changes nothing else.

    Raises JobNotEnded for a job still queued or running, and StorageUnavailable when S3
    fails: the fence is up by then, so the reaper finishes the purge."""
    fenced = repository.fence_purge(session, job_id)
    session.commit()
    if not fenced:
        raise JobNotEnded(str(job_id))
    report = remove_objects(store, job_id)
    repository.mark_purged(session, job_id)
    session.commit()
    return report


def discard_if_purged(
    sessions: sessionmaker[Session], store: ObjectStore, job_id: uuid.UUID, keys: list[str]
) -> bool:
    """For a worker that has just written `keys` of the job: if a purge has begun, remove
    them again and return True (the caller then stops: the job has ended)."""
    with sessions() as session:
        purged = repository.purge_started(session, job_id)
    if purged and keys:
        store.remove_objects(keys)
        log.info("job %s is being purged; removed %d object(s) just written", job_id, len(keys))
    return purged


def purge_expired(sessions: sessionmaker[Session], store: ObjectStore, settings: Settings) -> int:
    """Fence and purge a batch of jobs past their client's retention; returns how many."""
    with sessions.begin() as session:
        expired = repository.fence_expired_jobs(
            session, settings.default_retention_days, PURGE_BATCH
        )
    _finish(sessions, store, expired)
    return len(expired)


def finish_unfinished(
    sessions: sessionmaker[Session], store: ObjectStore, settings: Settings
) -> int:
    """Finish purges fenced more than `stale_after_s` ago whose objects may remain."""
    stale = timedelta(seconds=settings.stale_after_s)
    with sessions() as session:
        unfinished = repository.unfinished_purges(session, stale, PURGE_BATCH)
    _finish(sessions, store, unfinished)
    return len(unfinished)


def _finish(sessions: sessionmaker[Session], store: ObjectStore, job_ids: list[uuid.UUID]) -> None:
    for job_id in job_ids:
        report = remove_objects(store, job_id)
        with sessions.begin() as session:
            repository.mark_purged(session, job_id)
        log.info("purged job %s: %d objects, %d bytes", job_id, report.objects, report.bytes)
