"""Submitting a batch: every document is checked as a job of its own would be (the
submit service's own checks), then all the batch's jobs are recorded in one
transaction, or none.

A batch with any document that cannot be used is refused whole, with what is wrong
with each such document by its position, and nothing is stored or recorded: the caller
fixes or drops those documents and sends the batch again, and never has to find out
which part of a batch exists.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from sqlalchemy.orm import Session

from pagemill.clients import quotas
from pagemill.db.models import Batch, Client, Job
from pagemill.documents.inspect import DocumentInfo
from pagemill.domain import InputRejected
from pagemill.jobs import service as jobs
from pagemill.jobs.service import SavedUpload, SubmitOptions
from pagemill.settings import Settings
from pagemill.storage import ObjectStore

# Sources stored at once; the S3 client's connection pool holds 10.
STORE_THREADS = 8


@dataclass(frozen=True)
class UploadedDocument:
    upload: SavedUpload
    info: DocumentInfo


@dataclass(frozen=True)
class DocumentByUrl:
    source_url: str


@dataclass(frozen=True)
class RefusedDocument:
    """Refused before planning (its upload or inspection); kept to report it in place."""

    name: str | None
    code: str
    message: str


BatchDocument = UploadedDocument | DocumentByUrl | RefusedDocument


@dataclass(frozen=True)
class ItemError:
    index: int
    name: str | None  # the file's name or the source_url
    code: str
    message: str


class BatchRejected(Exception):
    def __init__(self, errors: list[ItemError], documents: int) -> None:
        super().__init__(f"{len(errors)} of {documents} documents cannot be used")
        self.errors = errors
        self.documents = documents

    @property
    def message(self) -> str:
        return (
            f"{len(self.errors)} of the batch's {self.documents} documents cannot be used; "
            "nothing was created. Fix or leave out those documents and send the batch again."
        )


def name_of(document: BatchDocument) -> str | None:
    if isinstance(document, UploadedDocument):
        return document.upload.filename
    if isinstance(document, DocumentByUrl):
        return document.source_url
    return document.name


def plan_jobs(
    session: Session,
    settings: Settings,
    client: Client,
    documents: Sequence[BatchDocument],
    options: SubmitOptions,
) -> list[Job]:
    """One planned job per document, or BatchRejected listing every one that fails."""
    errors: list[ItemError] = []
    planned: list[Job] = []
    for index, document in enumerate(documents):
        try:
            if isinstance(document, RefusedDocument):
                raise InputRejected(document.code, document.message)
            if isinstance(document, UploadedDocument):
                job = jobs.plan_job(
                    session, settings, client, document.upload, options, document.info
                )
            else:
                job = jobs.plan_url_job(session, settings, client, document.source_url, options)
        except InputRejected as rejected:
            errors.append(ItemError(index, name_of(document), rejected.code, rejected.message))
            continue
        planned.append(job)
    if errors:
        raise BatchRejected(errors, len(documents))
    return planned


def create_batch(
    session: Session,
    store: ObjectStore,
    settings: Settings,
    client: Client,
    documents: Sequence[BatchDocument],
    options: SubmitOptions,
    webhook_url: str | None,
) -> tuple[Batch, list[Job]]:
    """Store the uploaded sources and record the batch and its jobs (not yet committed,
    not yet published). If the caller's commit fails, it discards the sources
    (`discard_sources`), as a single submission does."""
    planned = plan_jobs(session, settings, client, documents, options)
    batch = Batch(
        id=uuid.uuid4(), client_id=client.id, documents=len(documents), webhook_url=webhook_url
    )
    # The batch's uploaded pages count against the quota together (a document by URL
    # has no pages until it is fetched): refused before anything is stored, and
    # exactly, under the client's lock, just before the jobs are recorded.
    pages = sum(job.pages_total or 0 for job in planned)
    quotas.check_pages(session, settings, client, pages, lock=False)
    # End the read-only transaction of the checks (nothing is pending yet): no connection
    # waits idle in it while the sources are copied to object storage.
    session.commit()
    try:
        for index, job in enumerate(planned):
            job.batch_id, job.batch_index = batch.id, index
        _store_sources(store, planned, documents)
        quotas.check_pages(session, settings, client, pages, lock=True)
        session.add(batch)
        session.flush()  # the batch before its jobs, which refer to it
        session.add_all(planned)
        session.flush()
    except Exception:
        session.rollback()
        discard_sources(store, [job.id for job in planned])
        raise
    return batch, planned


def _store_sources(
    store: ObjectStore, planned: Sequence[Job], documents: Sequence[BatchDocument]
) -> None:
    """The uploads to object storage, a few at a time: one after the other, a thousand
    small files would spend most of their time waiting on round trips."""
    uploads = [
        (job.id, document)
        for job, document in zip(planned, documents, strict=True)
        if isinstance(document, UploadedDocument)
    ]
    with ThreadPoolExecutor(max_workers=STORE_THREADS) as pool:
        stored = [
            pool.submit(jobs.store_source, store, job_id, document.upload, document.info)
            for job_id, document in uploads
        ]
        for future in stored:
            future.result()  # the first failure, once every upload has settled


def discard_sources(store: ObjectStore, job_ids: Sequence[uuid.UUID]) -> None:
    for job_id in job_ids:
        jobs.discard_source(store, job_id)
