"""/v1/jobs/{id}/pages/{n}/blocks: a page's text blocks, lines and words with their boxes."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Response

from api.deps import ClientDep, PageNumberPath, SessionDep, StoreDep
from api.errors import ApiError
from api.results import read_page, read_stored, result_job
from pagemill.db.models import Page
from pagemill.documents.blocks import PageBlocks
from pagemill.engines.catalog import GPU_ENGINES
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
    number: PageNumberPath,
    client: ClientDep,
    session: SessionDep,
    store: StoreDep,
) -> Response:
    job = result_job(job_id, client, session)
    page = read_page(session, job, number, "blocks")
    blocks_key = JobKeys(job_id).page_blocks(number, page.result_attempt)
    blocks = read_stored(session, store, job, blocks_key)
    if blocks is None:
        raise ApiError(404, "blocks_not_available", _why_no_blocks(page))
    return Response(blocks, media_type="application/json")


def _why_no_blocks(page: Page) -> str:
    if page.engine in GPU_ENGINES:
        return (
            f"Page {page.number} was read by a vision model whose profile gives no boxes "
            "(only grounding profiles such as deepseek-ocr do), so it has Markdown but no blocks."
        )
    return f"Page {page.number} was read before blocks were kept, so it has Markdown but no blocks."
