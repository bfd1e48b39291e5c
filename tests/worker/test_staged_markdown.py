"""A page's Markdown is kept on its row from its result until its job ends, so finalize
assembles the document from the rows it reads anyway instead of fetching every page
from S3 again; once the job has ended, the rows hold none of it."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.common import make_text_pdf
from pagemill.storage import JobKeys, ObjectStore
from tests.conftest import RUN_ID, TMP_ROOT, make_client_key
from tests.support import services
from tests.webhooks.conftest import sql
from worker.stages.ocr import STAGED_MARKDOWN_MAX_CHARS, stageable_markdown

pytestmark = pytest.mark.timeout(300)

PAGES = 3


def test_markdown_a_row_cannot_hold_is_left_to_s3() -> None:
    assert stageable_markdown("# Invoice\n\n| a | b |") == "# Invoice\n\n| a | b |"
    assert stageable_markdown("before\x00after") is None  # Postgres text holds no NUL
    assert stageable_markdown("x" * (STAGED_MARKDOWN_MAX_CHARS + 1)) is None


@pytest.fixture(scope="module")
def without_finalize(database_url: str, redis_client: Any, s3: Any) -> Iterator[str]:
    """An API and a real worker on queues of their own, the worker taking prepare and
    OCR but not finalize: a job stops with every page done and its document not yet
    assembled, for the test to finalize when it has looked at the rows."""
    port = services.free_port()
    prefix = f"t{RUN_ID}staged-"
    env = {
        **os.environ,
        "PAGEMILL_QUEUE_PREFIX": prefix,
        "PAGEMILL_API_BASE_URL": f"http://127.0.0.1:{port}",
    }
    api = services.start_api(env, TMP_ROOT / "staged-api.log", port)
    queues = ",".join(f"{prefix}{stage}" for stage in ("prepare", "ocr"))
    worker = services.start_worker(env, TMP_ROOT / "staged-worker.log", queues, concurrency=2)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        services.stop(worker)
        services.stop(api)


def test_finalize_assembles_what_the_rows_kept_and_the_rows_are_then_cleared(
    without_finalize: str, db: str, s3: ObjectStore, tmp_path: Path
) -> None:
    from pagemill.db.session import session_factory
    from pagemill.domain import JobStatus
    from pagemill.settings import get_settings
    from worker.stages.context import StageContext
    from worker.stages.finalize import finalize_job

    with _client(without_finalize) as client:
        job_id = _submit(client, tmp_path)
    staged = _rows_once_all_succeeded(job_id)

    # Each row holds exactly the page's Markdown as stored in S3 and served.
    keys = JobKeys(job_id)
    for number, markdown in staged:
        assert markdown, f"page {number} kept no Markdown"
        assert s3.get_bytes(keys.page_markdown(number, 1)).decode() == markdown

    # Page 2's object changes under the rows: the document must come from the rows.
    s3.put_bytes(keys.page_markdown(2, 1), b"# not what page 2 read", "text/markdown")
    # And page 3's row lost its copy (as a page whose Markdown a row cannot hold):
    # that page is read from S3.
    sql(
        "UPDATE pages SET staged_markdown = NULL WHERE job_id = %s AND number = 3 RETURNING id",
        job_id,
    )
    s3.put_bytes(keys.page_markdown(3, 1), b"# page 3 as stored", "text/markdown")

    ctx = StageContext(settings=get_settings(), sessions=session_factory(), store=s3)
    assert finalize_job(ctx, job_id) is JobStatus.succeeded
    document = s3.get_bytes(keys.document).decode()
    assert staged[1][1].strip() in document
    assert "not what page 2 read" not in document
    assert "# page 3 as stored" in document
    assert sql(
        "SELECT count(*) FROM pages WHERE job_id = %s AND staged_markdown IS NOT NULL", job_id
    ) == [(0,)]


def test_a_job_that_ends_otherwise_keeps_no_markdown_either(
    without_finalize: str, db: str, tmp_path: Path
) -> None:
    with _client(without_finalize) as client:
        job_id = _submit(client, tmp_path)
        assert len(_rows_once_all_succeeded(job_id)) == PAGES
        cancelled = client.delete(f"/v1/jobs/{job_id}")
        assert cancelled.status_code == 200, cancelled.text
    assert sql("SELECT status::text FROM jobs WHERE id = %s", job_id) == [("cancelled",)]
    assert sql(
        "SELECT count(*) FROM pages WHERE job_id = %s AND staged_markdown IS NOT NULL", job_id
    ) == [(0,)]


def _client(base_url: str) -> httpx.Client:
    headers = {"Authorization": f"Bearer {make_client_key()}"}
    return httpx.Client(base_url=base_url, headers=headers, timeout=60)


def _submit(client: httpx.Client, folder: Path) -> uuid.UUID:
    """A born-digital document of PAGES pages, read from its text layer."""
    pdf = make_text_pdf(folder / "pages.pdf", PAGES).read_bytes()
    response = client.post(
        "/v1/jobs",
        files={"file": ("pages.pdf", pdf, "application/pdf")},
        data={"engine": "auto", "cache": "false"},
    )
    assert response.status_code == 202, response.text
    return uuid.UUID(response.json()["id"])


def _rows_once_all_succeeded(job_id: uuid.UUID) -> list[tuple[int, str | None]]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        rows = sql(
            "SELECT number, status::text, staged_markdown FROM pages WHERE job_id = %s "
            "ORDER BY number",
            job_id,
        )
        if len(rows) == PAGES and all(status == "succeeded" for _, status, _ in rows):
            return [(number, markdown) for number, _, markdown in rows]
        time.sleep(0.2)
    raise AssertionError(f"job {job_id}'s pages did not all succeed: {rows}")
