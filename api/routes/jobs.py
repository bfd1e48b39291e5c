"""/v1/jobs: submit, inspect, fetch Markdown, list, cancel."""

from __future__ import annotations

import logging
import tempfile
import uuid
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Header, Query, Response, UploadFile
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from sqlalchemy.orm import Session

from api.deps import ClientDep, OffsetQuery, PageNumberPath, SessionDep, SettingsDep, StoreDep
from api.errors import ApiError, storage_unavailable_error
from api.inspection import busy_error, get_inspection_gate
from api.purging import PurgeOut, purge_now
from api.results import client_job, read_page, read_stored, refuse_if_purged, result_job
from api.routes.usage import quota_error
from pagemill.clients.quotas import QuotaExceeded
from pagemill.db.models import Client, Job
from pagemill.documents.inspect import InspectionBusy
from pagemill.domain import (
    TERMINAL_JOB_STATUSES,
    InputRejected,
    JobStatus,
    LicenseUse,
)
from pagemill.engines.catalog import ENGINE_CHOICES, describe_choices
from pagemill.jobs import idempotency, lifecycle, repository, service
from pagemill.jobs.schemas import JobDetailOut, JobListOut, JobOut, job_detail_out, job_out
from pagemill.queue import publish_prepare
from pagemill.settings import Settings
from pagemill.storage import JobKeys, StorageUnavailable
from pagemill.webhooks.outbox import publish_job_webhooks

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.post(
    "",
    status_code=202,
    response_model=JobDetailOut,
    responses={
        409: {"description": "The same Idempotency-Key is still being processed."},
        413: {"description": "The upload is over the size limit."},
        415: {"description": "The file is neither a PDF nor a supported image."},
        422: {"description": "The upload or a field cannot be used; see the error code."},
        429: {"description": "Too many requests, or a page quota reached; see Retry-After."},
        503: {"description": "Too busy to check the upload now; see Retry-After."},
    },
)
async def submit_job(
    response: Response,
    client: ClientDep,
    session: SessionDep,
    settings: SettingsDep,
    store: StoreDep,
    file: Annotated[
        UploadFile | None, File(description="A PDF or a PNG, JPEG, TIFF or WebP image.")
    ] = None,
    source_url: Annotated[
        str | None,
        Form(
            description="Instead of a file: an https URL, or s3://bucket/key in a bucket the "
            "deployment reads; the worker fetches it."
        ),
    ] = None,
    pages: Annotated[str | None, Form(description='Pages to convert, e.g. "1-3,7".')] = None,
    metadata: Annotated[str | None, Form(description="A JSON object, returned as is.")] = None,
    license_use: Annotated[LicenseUse | None, Form()] = None,
    webhook_url: Annotated[str | None, Form()] = None,
    engine: Annotated[str | None, Form(description=f"{describe_choices(ENGINE_CHOICES)}.")] = None,
    max_cost_usd: Annotated[
        Decimal | None,
        Form(ge=0, le=1_000_000, description="Refuse the job if its quote is above this."),
    ] = None,
    furniture: Annotated[
        str | None,
        Form(
            description="Running headers, footers and page numbers: separate (the default: "
            "out of document.md, listed per page in manifest.json), inline or drop."
        ),
    ] = None,
    cache: Annotated[
        bool,
        Form(
            description="false: convert again, even if this client sent the same file with "
            "the same options before (true reuses that result: no engine runs, no charge)."
        ),
    ] = True,
    extract: Annotated[
        str | None,
        Form(
            description="invoice: also read the invoice's fields, line items and arithmetic "
            "checks, served at GET /v1/jobs/{id}/invoice."
        ),
    ] = None,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            min_length=1,
            max_length=255,
            description="Retrying with the same key returns the first response, not a new job.",
        ),
    ] = None,
) -> Any:
    with tempfile.TemporaryDirectory(prefix="pagemill-upload-") as workdir:
        try:
            options = service.SubmitOptions(
                pages=service.check_page_selection(pages),
                license_use=license_use,
                webhook_url=service.check_webhook_url(webhook_url, settings),
                engine=engine,
                metadata=service.parse_metadata(metadata),
                max_cost_usd=max_cost_usd,
                furniture=service.parse_furniture(furniture),
                cache=cache,
                extract=service.parse_extract(extract),
            )
            upload, checked_url = None, ""
            fingerprint: tuple[str, str | None]
            if service.given_by_url(file is not None, source_url):
                checked_url = service.check_source_url(source_url or "", settings)
                fingerprint = (service.source_url_sha256(checked_url), None)
            elif file is not None:
                upload = await run_in_threadpool(
                    service.save_upload,
                    file.file,
                    Path(workdir) / "upload",
                    settings.max_upload_bytes,
                    file.filename,
                )
                fingerprint = (upload.sha256, upload.filename)
        except service.SubmissionRejected as rejected:
            raise ApiError(rejected.http_status, rejected.code, rejected.message) from None
        if idempotency_key is not None:
            stored = _begin_idempotent(
                session, settings, client, idempotency_key, *fingerprint, options
            )
            if stored is not None:
                return JSONResponse(
                    stored.body,
                    stored.status,
                    headers={"Location": f"/v1/jobs/{stored.body['id']}"},
                )
        try:
            if upload is None:
                job = await run_in_threadpool(
                    service.submit_url_job, session, settings, client, checked_url, options
                )
            else:
                # No database connection is held while the upload waits for and undergoes
                # inspection: the key's claim above is committed, and so is authentication.
                info = await get_inspection_gate(
                    settings.inspect_concurrency, settings.inspect_queue_wait_s
                ).inspect(upload.path, settings, options.engine or settings.default_engine)
                job = await run_in_threadpool(
                    service.submit_job, session, store, settings, client, upload, options, info
                )
        except (InputRejected, InspectionBusy, StorageUnavailable) as refused:
            _abandon(session, client, idempotency_key)
            if isinstance(refused, StorageUnavailable):
                raise storage_unavailable_error(refused, "nothing was created") from None
            if isinstance(refused, InspectionBusy):
                raise busy_error(settings, str(refused)) from None
            if isinstance(refused, QuotaExceeded):
                raise quota_error(refused) from None
            raise ApiError(refused.http_status, refused.code, refused.message) from None
        except Exception:
            # submit_job has removed whatever it stored; the key must not stay claimed.
            _abandon(session, client, idempotency_key)
            raise
    try:
        body = job_detail_out(job, repository.list_pages(session, job.id), settings.api_base_url)
        if idempotency_key is not None:
            idempotency.complete(
                session, client.id, idempotency_key, job.id, 202, body.model_dump(mode="json")
            )
        session.commit()
    except Exception:
        # Nothing of the request may remain: not the stored source (a cache hit's copied
        # results too), which no job would ever purge, nor a claimed key, which would
        # answer every retry "still in flight" until it was taken for abandoned.
        _abandon(session, client, idempotency_key)
        if upload is not None:
            service.discard_source_after_failure(store, job.id)
        raise
    if job.cached_from is None:
        _publish_prepare(job.id)
    else:
        publish_job_webhooks(job.id)  # a cache hit has ended already
    response.headers["Location"] = f"/v1/jobs/{job.id}"
    return body


def _begin_idempotent(
    session: Session,
    settings: Settings,
    client: Client,
    key: str,
    source_sha256: str,
    filename: str | None,
    options: service.SubmitOptions,
) -> idempotency.StoredResponse | None:
    request_sha256 = service.request_fingerprint(source_sha256, options, filename, settings, client)
    try:
        return idempotency.begin(
            session,
            client.id,
            key,
            request_sha256,
            ttl=timedelta(seconds=settings.idempotency_ttl_s),
            # Longer than a submission can take: the wait for the upload check and the
            # check itself have their own limits.
            abandoned_after=timedelta(
                seconds=settings.inspect_queue_wait_s + settings.inspect_timeout_s + 60
            ),
        )
    except idempotency.IdempotencyKeyReused:
        raise ApiError(
            422,
            "idempotency_key_reused",
            "This Idempotency-Key was used for a different request; use a new key.",
        ) from None
    except idempotency.IdempotencyKeyInFlight:
        raise ApiError(
            409,
            "idempotency_key_in_flight",
            "A request with this Idempotency-Key is still being processed; retry shortly.",
            headers={"Retry-After": "1"},
        ) from None


def _abandon(session: Session, client: Client, idempotency_key: str | None) -> None:
    """Roll back a submission that is refused or has failed, and free its
    Idempotency-Key for the retry, without hiding why the submission ended."""
    session.rollback()
    if idempotency_key is None:
        return
    try:
        idempotency.release(session, client.id, idempotency_key)
    except Exception:
        session.rollback()
        log.exception(
            "could not release Idempotency-Key %r of client %s", idempotency_key, client.id
        )


def _publish_prepare(job_id: uuid.UUID) -> None:
    # The job is committed: if the broker is down, the reaper publishes it later,
    # so the caller still gets its 202.
    try:
        publish_prepare(str(job_id))
    except Exception:
        log.exception("could not publish prepare for job %s; left for the reaper", job_id)


@router.get("", response_model=JobListOut)
def list_jobs(
    client: ClientDep,
    session: SessionDep,
    settings: SettingsDep,
    status: JobStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: OffsetQuery = 0,
) -> JobListOut:
    jobs = repository.list_client_jobs(session, client.id, status, limit, offset)
    return JobListOut(
        jobs=[
            job_out(job, repository.list_pages(session, job.id), settings.api_base_url)
            for job in jobs
        ],
        limit=limit,
        offset=offset,
    )


@router.get("/{job_id}", response_model=JobDetailOut)
def get_job(
    job_id: uuid.UUID, client: ClientDep, session: SessionDep, settings: SettingsDep
) -> JobDetailOut:
    job = _client_job(session, client, job_id)
    return job_detail_out(job, repository.list_pages(session, job.id), settings.api_base_url)


@router.delete(
    "/{job_id}",
    response_model=JobOut | PurgeOut,
    responses={
        409: {"description": "The job has already ended (without purge=true)."},
        503: {"description": "Object storage failed mid-purge; the reaper finishes it."},
    },
)
def cancel_job(
    job_id: uuid.UUID,
    client: ClientDep,
    session: SessionDep,
    settings: SettingsDep,
    store: StoreDep,
    purge_objects: Annotated[
        bool,
        Query(
            alias="purge",
            description="Also remove the job's source, page images and results now "
            "(cancelling it first if it has not ended); its record stays.",
        ),
    ] = False,
) -> JobOut | PurgeOut:
    job = _client_job(session, client, job_id)
    if job.status in TERMINAL_JOB_STATUSES and not purge_objects:
        raise ApiError(409, "job_finished", f"The job has already ended ({job.status.value}).")
    if job.status not in TERMINAL_JOB_STATUSES:
        lifecycle.cancel_job(session, job.id)
        session.commit()
        publish_job_webhooks(job.id)
    if purge_objects:
        return purge_now(session, store, settings, job)
    session.refresh(job)
    return job_out(job, repository.list_pages(session, job.id), settings.api_base_url)


@router.get(
    "/{job_id}/markdown",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/markdown": {}}}},
)
def get_document_markdown(
    job_id: uuid.UUID, client: ClientDep, session: SessionDep, store: StoreDep
) -> StreamingResponse:
    job = result_job(job_id, client, session)
    ended = job.status in (JobStatus.succeeded, JobStatus.failed)
    # Opened before the answer starts: once it has, a missing object could only cut the
    # body short under a 200.
    chunks = store.open_chunks(JobKeys(job.id).document) if ended else None
    if ended and chunks is None:
        # A purge that began after the job was read has removed it: 410, as from now on.
        refuse_if_purged(repository.reload_job(session, job.id) or job)
    if chunks is None:
        raise ApiError(
            409,
            "not_ready",
            f"The document's Markdown is not ready; the job is {job.status.value}.",
        )
    return StreamingResponse(chunks, media_type="text/markdown; charset=utf-8")


@router.get("/{job_id}/pages/{number}/markdown", response_class=PlainTextResponse)
def get_page_markdown(
    job_id: uuid.UUID,
    number: PageNumberPath,
    client: ClientDep,
    session: SessionDep,
    store: StoreDep,
) -> PlainTextResponse:
    job = result_job(job_id, client, session)
    page = read_page(session, job, number, "Markdown")
    markdown_key = JobKeys(job.id).page_markdown(number, page.result_attempt)
    stored = read_stored(session, store, job, markdown_key)
    if stored is None:
        raise ApiError(409, "page_not_ready", f"Page {number} has no Markdown stored.")
    return PlainTextResponse(stored.decode(), media_type="text/markdown; charset=utf-8")


def _client_job(session: SessionDep, client: Client, job_id: uuid.UUID) -> Job:
    return client_job(session, client, job_id)
