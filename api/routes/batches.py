"""/v1/batches: many documents, one job each, and their progress together.

The form is read here rather than declared field by field: a batch holds up to
`batch_max_documents` files, past the multipart parser's default of 1,000.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
import uuid
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import Field, TypeAdapter, ValidationError
from sqlalchemy.orm import Session
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.deps import ClientDep, SessionDep, SettingsDep, StoreDep
from api.errors import ApiError, body_unreadable_message, invalid_request_message
from api.inspection import busy_error, get_inspection_gate
from api.routes.usage import quota_error
from pagemill.batches import repository as batches
from pagemill.batches import service as batch_service
from pagemill.batches.schemas import BatchOut, batch_out, item_errors_out
from pagemill.batches.service import (
    BatchDocument,
    BatchRejected,
    DocumentByUrl,
    RefusedDocument,
    UploadedDocument,
)
from pagemill.clients.quotas import QuotaExceeded
from pagemill.db.models import Batch
from pagemill.documents.inspect import InspectionBusy
from pagemill.domain import InputRejected, LicenseUse
from pagemill.jobs import repository as jobs_repository
from pagemill.jobs import service
from pagemill.queue import publish_prepare
from pagemill.settings import Settings
from pagemill.storage import StorageUnavailable

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/batches", tags=["batches"])

# Tries at inspecting one document of a batch that the machine was too busy to inspect.
INSPECTION_TRIES = 3


@router.post(
    "",
    status_code=202,
    response_model=BatchOut,
    description="Multipart form: `file` (repeated) and/or `source_url` (repeated), one job "
    "each, with the options of POST /v1/jobs applied to every document (pages, metadata, "
    "license_use, engine, max_cost_usd, furniture); `webhook_url` receives batch.completed, "
    "and with `job_webhooks=true` each job's own event too. A batch with any document that "
    "cannot be used is refused whole (422 batch_rejected, one entry per such document) and "
    "nothing is created.",
    responses={
        413: {"description": "The request is over batch_max_bytes."},
        429: {"description": "Too many requests, or a page quota reached; see Retry-After."},
        422: {"description": "A field or a document cannot be used; see the error code."},
        503: {
            "description": "Too busy to check the uploads now, or object storage failed; "
            "see Retry-After."
        },
    },
)
async def submit_batch(
    request: Request,
    client: ClientDep,
    session: SessionDep,
    settings: SettingsDep,
    store: StoreDep,
) -> Any:
    async with _read_form(request, settings) as form:
        with tempfile.TemporaryDirectory(prefix="pagemill-batch-") as workdir:
            try:
                options, webhook_url = _options(form, settings)
                engine = options.engine or settings.default_engine
                documents = await _documents(form, Path(workdir), settings, engine)
            except service.SubmissionRejected as rejected:
                raise ApiError(rejected.http_status, rejected.code, rejected.message) from None
            except InspectionBusy as busy:
                raise busy_error(settings, str(busy)) from None
            try:
                batch, jobs = await run_in_threadpool(
                    batch_service.create_batch,
                    session,
                    store,
                    settings,
                    client,
                    documents,
                    options,
                    webhook_url,
                )
            except QuotaExceeded as exceeded:
                session.rollback()
                raise quota_error(exceeded) from None
            except StorageUnavailable:
                # create_batch has removed what it stored: nothing of the batch remains.
                raise ApiError(
                    503,
                    "storage_unavailable",
                    "Object storage failed while the batch's documents were stored; nothing "
                    "was created. Send the batch again shortly.",
                    headers={"Retry-After": "5"},
                ) from None
            except BatchRejected as rejected:
                session.rollback()
                error = {"code": "batch_rejected", "message": rejected.message}
                return JSONResponse(
                    {"error": {**error, "items": item_errors_out(rejected.errors)}}, 422
                )
    job_ids = [job.id for job in jobs]  # read before the commit expires them
    try:
        session.commit()
    except Exception:
        session.rollback()
        batch_service.discard_sources(store, job_ids)
        raise
    # The answer shows the batch as recorded, before any worker can have started on it.
    body = _batch_body(session, settings, batch, job_ids)
    await run_in_threadpool(_publish_prepare, job_ids)
    return JSONResponse(
        body.model_dump(mode="json"), 202, headers={"Location": f"/v1/batches/{batch.id}"}
    )


@router.get("/{batch_id}", response_model=BatchOut)
def get_batch(
    batch_id: uuid.UUID, client: ClientDep, session: SessionDep, settings: SettingsDep
) -> BatchOut:
    # Another client's batch is reported as missing, not forbidden: its existence is private.
    batch = batches.get_client_batch(session, client.id, batch_id)
    if batch is None:
        raise ApiError(404, "batch_not_found", "There is no batch with this id.")
    return _batch_body(session, settings, batch, batches.batch_job_ids(session, batch.id))


def _batch_body(
    session: Session, settings: Settings, batch: Batch, job_ids: list[uuid.UUID]
) -> BatchOut:
    totals = jobs_repository.batch_totals(session, batch.id)
    return batch_out(batch, totals, job_ids, settings.api_base_url)


@contextlib.asynccontextmanager
async def _read_form(request: Request, settings: Settings) -> AsyncIterator[FormData]:
    """The request's form with room for a full batch; its files are closed on exit."""
    limit = settings.batch_max_documents
    try:
        # Options are a dozen fields at most; every other field is a source_url.
        form = await request.form(max_files=limit, max_fields=limit + 20)
    except StarletteHTTPException as error:
        if "Too many" in str(error.detail):
            raise ApiError(
                422,
                "too_many_documents",
                f"A batch holds at most {limit} documents; send the rest in another batch.",
            ) from None
        raise ApiError(400, "invalid_request", body_unreadable_message(str(error.detail))) from None
    try:
        yield form
    finally:
        await form.close()


def _field(form: FormData, name: str) -> str | None:
    value = form.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise service.SubmissionRejected("invalid_request", f"The {name} field must be text.")
    return value if value.strip() else None


# The fields POST /v1/jobs declares with a type, read by the same rules, so that a
# mistake in one is refused in the same words there and here.
_LICENSE_USE = TypeAdapter(LicenseUse)
_MAX_COST_USD = TypeAdapter(Annotated[Decimal, Field(ge=0, le=1_000_000)])
Value = TypeVar("Value")


def _typed(form: FormData, name: str, adapter: TypeAdapter[Value]) -> Value | None:
    raw = _field(form, name)
    if raw is None:
        return None
    try:
        return adapter.validate_python(raw)
    except ValidationError as error:
        problem = error.errors()[0]["msg"]
        raise service.SubmissionRejected(
            "invalid_request", invalid_request_message(name, problem)
        ) from None


def _options(form: FormData, settings: Settings) -> tuple[service.SubmitOptions, str | None]:
    """The options every job of the batch gets, and where batch.completed goes. Each is
    checked here, once for the batch, not once per document."""
    webhook_url = service.check_webhook_url(_field(form, "webhook_url"), settings)
    job_webhooks = (_field(form, "job_webhooks") or "false").lower() in ("true", "1", "yes")
    options = service.SubmitOptions(
        pages=service.check_page_selection(_field(form, "pages")),
        license_use=_typed(form, "license_use", _LICENSE_USE),
        webhook_url=webhook_url if job_webhooks else None,
        engine=service.check_engine(_field(form, "engine")),
        metadata=service.parse_metadata(_field(form, "metadata")),
        max_cost_usd=_typed(form, "max_cost_usd", _MAX_COST_USD),
        furniture=service.parse_furniture(_field(form, "furniture")),
    )
    return options, webhook_url


async def _documents(
    form: FormData, workdir: Path, settings: Settings, requested_engine: str
) -> list[BatchDocument]:
    """Each document saved and inspected (uploads) or checked for form (URLs), in the
    order sent; one that cannot be used is kept as refused, to be reported in place."""
    files = [item for item in form.getlist("file") if isinstance(item, UploadFile)]
    urls = [item for item in form.getlist("source_url") if isinstance(item, str) and item.strip()]
    if not files and not urls:
        raise service.SubmissionRejected(
            "no_document", "Send the batch's documents as file fields or source_url fields."
        )
    if len(files) + len(urls) > settings.batch_max_documents:
        raise service.SubmissionRejected(
            "too_many_documents",
            f"A batch holds at most {settings.batch_max_documents} documents; send the rest "
            "in another batch.",
        )
    saved = [await _saved(upload, workdir / str(i), settings) for i, upload in enumerate(files)]
    documents = await _inspect_all(saved, settings, requested_engine)
    for url in urls:
        try:
            documents.append(DocumentByUrl(service.check_source_url(url, settings)))
        except service.SubmissionRejected as rejected:
            documents.append(RefusedDocument(url, rejected.code, rejected.message))
    return documents


async def _saved(
    upload: UploadFile, path: Path, settings: Settings
) -> service.SavedUpload | RefusedDocument:
    try:
        return await run_in_threadpool(
            service.save_upload, upload.file, path, settings.max_upload_bytes, upload.filename
        )
    except service.SubmissionRejected as rejected:
        return RefusedDocument(upload.filename, rejected.code, rejected.message)


async def _inspect_all(
    saved: list[service.SavedUpload | RefusedDocument], settings: Settings, requested_engine: str
) -> list[BatchDocument]:
    """Each saved upload inspected, as many at once as the gate admits; a busy machine
    refuses the whole batch (InspectionBusy), never one document."""
    gate = get_inspection_gate(settings.inspect_concurrency, settings.inspect_queue_wait_s)

    async def inspect(upload: service.SavedUpload | RefusedDocument) -> BatchDocument:
        if isinstance(upload, RefusedDocument):
            return upload
        # A moment of contention should not cost the whole batch: a few tries each.
        for attempt in range(1, INSPECTION_TRIES + 1):
            try:
                info = await gate.inspect(upload.path, settings, requested_engine)
                return UploadedDocument(upload, info)
            except InputRejected as rejected:
                return RefusedDocument(upload.filename, rejected.code, rejected.message)
            except InspectionBusy:
                if attempt == INSPECTION_TRIES:
                    raise
        raise AssertionError("unreachable")

    documents: list[BatchDocument] = []
    # In groups of the gate's size: all at once would make the last wait past its turn.
    step = max(1, settings.inspect_concurrency)
    for start in range(0, len(saved), step):
        documents += await asyncio.gather(*(inspect(u) for u in saved[start : start + step]))
    return documents


def _publish_prepare(job_ids: list[uuid.UUID]) -> None:
    # The jobs are committed: what the broker does not take now, the reaper publishes.
    for job_id in job_ids:
        try:
            publish_prepare(str(job_id))
        except Exception:
            log.exception("could not publish prepare for job %s; left for the reaper", job_id)
