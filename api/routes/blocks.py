"""/v1/jobs/{id}/pages/{n}/blocks: a page's text blocks, lines and words with their boxes."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Response
from fastapi import Path as FastApiPath

from api.deps import ClientDep, SessionDep, StoreDep
from api.errors import ApiError
from api.results import refuse_if_purged
from pagemill.db.models import Page
from pagemill.documents.blocks import PageBlocks
from pagemill.documents.pagerange import selection_includes
from pagemill.domain import TERMINAL_JOB_STATUSES, PageStatus
from pagemill.engines.catalog import GPU_ENGINES
from pagemill.jobs import repository
from pagemill.storage import JobKeys

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.get(
    "/{job_id}/pages/{number}/blocks",
    response_class=Response,
    responses={
        200: {
            "model": PageBlocks,
            "description": "The page's blocks: boxes in points from the page's top-left corner.",
        },
        404: {"description": "No such job or page, or the page's engine gave no boxes."},
        409: {"description": "The page has not been read yet."},
        410: {"description": "The job's stored objects were purged."},
    },
)
def get_page_blocks(
    job_id: uuid.UUID,
    number: Annotated[int, FastApiPath(ge=1, le=1_000_000)],
    client: ClientDep,
    session: SessionDep,
    store: StoreDep,
) -> Response:
    page = _read_page(session, client.id, job_id, number)
    key = JobKeys(job_id).page_blocks(number)
    if not store.exists(key):
        raise ApiError(404, "blocks_not_available", _why_no_blocks(page))
    return Response(store.get_bytes(key), media_type="application/json")


def _read_page(session: SessionDep, client_id: uuid.UUID, job_id: uuid.UUID, number: int) -> Page:
    """The page, read: the same answers as the page's Markdown gives when it is not."""
    # Another client's job is reported as missing, not forbidden: its existence is private.
    job = repository.get_client_job(session, client_id, job_id)
    if job is None:
        raise ApiError(404, "job_not_found", "There is no job with this id.")
    refuse_if_purged(job)
    page = repository.get_page_by_number(session, job.id, number)
    if page is None:
        if job.document_pages is None:  # a source still being fetched
            raise ApiError(
                409,
                "page_not_ready",
                f"Page {number} has no blocks; the document is not fetched yet "
                f"(the job is {job.status.value}).",
            )
        if not selection_includes(job.page_selection, job.document_pages, number):
            raise ApiError(404, "page_not_found", f"Page {number} is not part of this job.")
        if job.status in TERMINAL_JOB_STATUSES:
            why = f"the job ended ({job.status.value}) before the page was prepared"
        else:
            why = f"the job is {job.status.value} and has not prepared it yet"
        raise ApiError(409, "page_not_ready", f"Page {number} has no blocks; {why}.")
    if page.status is not PageStatus.succeeded:
        raise ApiError(
            409, "page_not_ready", f"Page {number} has no blocks; it is {page.status.value}."
        )
    return page


def _why_no_blocks(page: Page) -> str:
    if page.engine in GPU_ENGINES:
        return (
            f"Page {page.number} was read by a vision model whose profile gives no boxes "
            "(only grounding profiles such as deepseek-ocr do), so it has Markdown but no blocks."
        )
    return f"Page {page.number} was read before blocks were kept, so it has Markdown but no blocks."
