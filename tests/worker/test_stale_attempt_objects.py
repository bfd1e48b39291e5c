"""An OCR attempt that lost its page changes nothing: not the page's row (its result write
is fenced) and not the page's objects in S3, which it writes before that write is refused.

The stale attempt runs the real ocr stage against real Postgres and S3; only the engine
is a double, so the test decides when each attempt's reading comes back.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pymupdf
import pytest

from bench.common import make_text_pdf
from pagemill.clients.repository import authenticate
from pagemill.db.session import session_factory, session_scope
from pagemill.domain import JobStatus, PageStatus
from pagemill.jobs.repository import PageClaim
from pagemill.settings import get_settings
from pagemill.storage import JobKeys, ObjectStore
from tests.support.factories import add_job
from tests.webhooks.conftest import sql
from worker.engines.base import EngineResult, PageFacts, PageInput
from worker.stages import ocr
from worker.stages.context import StageContext
from worker.stages.finalize import finalize_job

pytestmark = pytest.mark.timeout(120)

STALE_THREAD = "stale-ocr-attempt"
STALE = "# Read by the attempt that lost the page\n"
WINNER = "# Read by the attempt that won the page\n"


@dataclasses.dataclass
class EngineDouble:
    """Answers the winner at once; holds the stale attempt's reading until released."""

    stale_reading: threading.Event = dataclasses.field(default_factory=threading.Event)
    release_stale: threading.Event = dataclasses.field(default_factory=threading.Event)

    def convert(self, engine_name: str, page: PageInput) -> EngineResult:
        markdown = WINNER
        if threading.current_thread().name == STALE_THREAD:
            self.stale_reading.set()
            assert self.release_stale.wait(60), "the stale attempt was never released"
            markdown = STALE
        return EngineResult(markdown=markdown, device_seconds=0.2, finish_reason="stop")


@pytest.fixture()
def engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[EngineDouble]:
    double = EngineDouble()
    monkeypatch.setattr(ocr, "_convert", double.convert)
    yield double
    double.release_stale.set()


def queued_page(s3: ObjectStore, api_key: str, tmp_path: Path) -> tuple[uuid.UUID, int]:
    """A running job's one page, rendered and queued for OCR."""
    pdf = make_text_pdf(tmp_path / "page.pdf", 1)
    with pymupdf.open(pdf) as document:
        pixmap = document.load_page(0).get_pixmap(dpi=100)
        png = pixmap.tobytes("png")
    facts = PageFacts.image_only(1, 595, 842)
    with session_scope() as session:
        client = authenticate(session, api_key)
        assert client is not None
        page_fields = {
            "status": PageStatus.queued,
            "engine": "rapidocr",
            "facts": dataclasses.asdict(facts),
            "image_dpi": 100,
            "image_width_px": pixmap.width,
        }
        job = add_job(session, client.id, [page_fields], status=JobStatus.running)
        job_id = job.id
    s3.put_bytes(JobKeys(job_id).page_image(1), png, "image/png")
    [(page_id,)] = sql("SELECT id FROM pages WHERE job_id = %s", job_id)
    return job_id, page_id


def stored(s3: ObjectStore, job_id: uuid.UUID) -> dict[str, bytes]:
    """Every result object of the job's pages, by key, with its bytes."""
    prefix = JobKeys(job_id).prefix + "/pages/"
    return {
        item.key: s3.get_bytes(item.key)
        for item in s3.list_objects(prefix)
        if item.key.endswith((".md", ".json"))
    }


def test_an_attempt_that_lost_its_page_changes_none_of_its_objects(
    s3: ObjectStore, api_url: str, api_key: str, engine: EngineDouble, tmp_path: Path
) -> None:
    job_id, page_id = queued_page(s3, api_key, tmp_path)
    ctx = StageContext(settings=get_settings(), sessions=session_factory(), store=s3)

    # The first attempt claims the page and is still reading it when its lease runs out.
    stale_run: list[ocr.PageRun] = []
    stale = threading.Thread(
        target=lambda: stale_run.append(ocr.run_page(ctx, page_id)), name=STALE_THREAD
    )
    stale.start()
    assert engine.stale_reading.wait(60), "the first attempt never reached its engine"
    sql(
        "UPDATE pages SET lease_expires_at = now() - interval '1 second' "
        "WHERE id = %s RETURNING id",
        page_id,
    )

    # A second attempt takes the page over and finishes it.
    won = ocr.run_page(ctx, page_id)
    assert won.outcome is ocr.PageOutcome.succeeded and won.job_complete
    before = stored(s3, job_id)
    assert before, "the winning attempt stored nothing"

    # Then the first attempt's reading comes back.
    engine.release_stale.set()
    stale.join(60)
    assert not stale.is_alive()
    assert [run.outcome for run in stale_run] == [ocr.PageOutcome.skipped]

    # Its result write was refused, and the objects it wrote on the way are gone: the
    # page's objects are the winner's, byte for byte.
    [(status, attempts, result_attempt, staged)] = sql(
        "SELECT status::text, attempts, result_attempt, staged_markdown FROM pages WHERE id = %s",
        page_id,
    )
    assert (status, attempts, result_attempt, staged) == ("succeeded", 2, 2, WINNER)
    after = stored(s3, job_id)
    assert after == before
    assert not any(STALE.encode() in body for body in after.values())
    assert JobKeys(job_id).page_markdown(1, 2) in after

    # What a caller reads, page and document, is the winner's.
    with httpx.Client(base_url=api_url, headers={"Authorization": f"Bearer {api_key}"}) as api:
        page = api.get(f"/v1/jobs/{job_id}/pages/1/markdown")
        assert page.status_code == 200, page.text
        assert page.text == WINNER
    assert finalize_job(ctx, job_id) is JobStatus.succeeded
    document = s3.get_bytes(JobKeys(job_id).document).decode()
    assert WINNER.strip() in document and STALE.strip() not in document


def test_a_refused_attempt_keeps_objects_its_row_names_as_the_result(
    s3: ObjectStore, api_key: str, tmp_path: Path
) -> None:
    """A result write whose commit went unheard, then refused when written again: the
    page's result is this attempt's own, and its objects stay."""
    job_id, page_id = queued_page(s3, api_key, tmp_path)
    sql(
        "UPDATE pages SET status = 'succeeded', attempts = 1, result_attempt = 1 "
        "WHERE id = %s RETURNING id",
        page_id,
    )
    keys = JobKeys(job_id)
    s3.put_bytes(keys.page_markdown(1, 1), WINNER.encode(), "text/markdown")
    ctx = StageContext(settings=get_settings(), sessions=session_factory(), store=s3)
    claim = PageClaim(page_id=page_id, job_id=job_id, number=1, attempt=1)

    ocr._discard_lost_attempt(ctx, claim)
    assert s3.get_bytes(keys.page_markdown(1, 1)).decode() == WINNER

    # The same call for an attempt the row does not name removes that attempt's objects.
    s3.put_bytes(keys.page_markdown(1, 2), STALE.encode(), "text/markdown")
    ocr._discard_lost_attempt(ctx, dataclasses.replace(claim, attempt=2))
    assert not s3.exists(keys.page_markdown(1, 2))
    assert s3.exists(keys.page_markdown(1, 1))
