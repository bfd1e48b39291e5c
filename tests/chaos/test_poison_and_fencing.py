"""A document that hangs the renderer fails after capped attempts and the worker lives
on; a stale attempt can never overwrite newer work."""

from __future__ import annotations

import zlib
from datetime import timedelta
from pathlib import Path
from typing import Any

import pymupdf
from sqlalchemy import update

from pagemill.db.models import Page
from pagemill.db.session import session_factory
from pagemill.domain import PageStatus
from pagemill.jobs import repository
from pagemill.settings import get_settings
from tests.chaos.conftest import db_rows, wait_terminal
from tests.chaos.test_lost_and_killed import submit
from tests.conftest import SAMPLES
from worker import registration
from worker.stages.ocr import PageOutcome, record_time_limit_kill


def renderer_hanging_pdf(path: Path, strokes: int = 3_000_000) -> Path:
    """A 400 KB PDF whose one page draws three million full-page strokes: it takes
    MuPDF minutes to render, the shape of a hostile or broken document."""
    document = pymupdf.open()
    page = document.new_page(width=595, height=842)
    page.insert_text((72, 72), "x")
    compressor = zlib.compressobj(9)
    stroke = b"0.1 w 10 10 m 585 832 l 585 10 l 10 832 l h S\n"
    body = b"".join(compressor.compress(stroke * 10_000) for _ in range(strokes // 10_000))
    xref = page.get_contents()[0]
    document.update_stream(xref, body + compressor.flush(), compress=False)
    document.xref_set_key(xref, "Filter", "/FlateDecode")
    document.save(path)
    return path


def test_poison_document_fails_after_capped_attempts_and_worker_lives(
    stack_factory: Any, tmp_path: Path
) -> None:
    stack, _, _ = stack_factory(PAGEMILL_RENDER_TIMEOUT_S="4")
    stack.start_api()
    worker = stack.start_worker()
    with stack.client() as client:
        poison = submit(client, renderer_hanging_pdf(tmp_path / "poison.pdf"))
        assert wait_terminal(poison, 180) == "failed"
        [(code, message, failures)] = db_rows(
            "SELECT error_code, error_message, prepare_failures FROM jobs WHERE id = %s", poison
        )
        assert code == "prepare_failed"
        assert "longer than 4 s" in message and "3 attempts" in message
        assert failures == 3
        assert worker.poll() is None, "the worker must survive the document"
        healthy = submit(client, SAMPLES / "invoice-multipage.pdf")
        assert wait_terminal(healthy, 120) == "succeeded"


def test_stale_attempt_cannot_overwrite_newer_work(stack_factory: Any) -> None:
    stack, _, _ = stack_factory()
    stack.start_api()
    with stack.client() as client:
        job_id = submit(client, SAMPLES / "invoice-multipage.pdf")
    sessions = session_factory()
    with sessions.begin() as session:
        repository.claim_prepare(session, job_id, timedelta(seconds=60))
        repository.insert_page(session, {"job_id": job_id, "number": 1, "engine": "textlayer"})
        page = repository.get_page_by_number(session, job_id, 1)
        assert page is not None
        page_id = page.id
    lease = timedelta(seconds=60)
    with sessions.begin() as session:
        first = repository.claim_page(session, page_id, lease)
        assert first is not None and first.attempt == 1
        # While the first attempt holds its lease, nobody else gets the page.
        assert repository.claim_page(session, page_id, lease) is None
        # The first attempt stalls past its lease...
        session.execute(
            update(Page).where(Page.id == page_id).values(lease_expires_at=Page.started_at)
        )
    with sessions.begin() as session:
        second = repository.claim_page(session, page_id, lease)
        assert second is not None and second.attempt == 2
    with sessions.begin() as session:
        # ...and its late result is refused; the newer attempt's is kept.
        assert not repository.finish_page(
            session, first, {"status": PageStatus.succeeded, "output_chars": 111}
        )
        assert repository.finish_page(
            session, second, {"status": PageStatus.succeeded, "output_chars": 222}
        )
        assert not repository.finish_page(
            session, second, {"status": PageStatus.succeeded, "output_chars": 333}
        )
    [(status, chars, attempts)] = db_rows(
        "SELECT status::text, output_chars, attempts FROM pages WHERE id = %s", page_id
    )
    assert (status, chars, attempts) == ("succeeded", 222, 2)


def test_late_time_limit_report_leaves_another_workers_attempt_alone(
    stack_factory: Any, monkeypatch: Any
) -> None:
    """A worker's main process records a pool child killed at the time limit. Cut off
    from the database past the page's lease, its report arrives after another worker took
    the page: it must not fail or charge that worker's running attempt."""
    stack, _, _ = stack_factory()
    stack.start_api()
    with stack.client() as client:
        job_id = submit(client, SAMPLES / "invoice-multipage.pdf")
    sessions = session_factory()
    with sessions.begin() as session:
        repository.claim_prepare(session, job_id, timedelta(seconds=60))
        repository.insert_page(session, {"job_id": job_id, "number": 1, "engine": "textlayer"})
        page = repository.get_page_by_number(session, job_id, 1)
        assert page is not None
        page_id = page.id
    lease = timedelta(seconds=60)
    with sessions.begin() as session:
        assert repository.claim_page(session, page_id, lease, "host-a:1:aaaa") is not None
        session.execute(
            update(Page).where(Page.id == page_id).values(lease_expires_at=Page.started_at)
        )
    with sessions.begin() as session:
        taken_over = repository.claim_page(session, page_id, lease, "host-b:2:bbbb")
        assert taken_over is not None and taken_over.attempt == 2

    monkeypatch.setattr(registration, "_worker_id", "host-a:1:aaaa")
    assert record_time_limit_kill(sessions, get_settings(), page_id).outcome is PageOutcome.skipped
    [(status, attempts, failures, error)] = db_rows(
        "SELECT status::text, attempts, engine_failures, error FROM pages WHERE id = %s", page_id
    )
    assert (status, attempts, failures, error) == ("running", 2, 0, None)

    # The worker that holds the page does have its kill recorded.
    monkeypatch.setattr(registration, "_worker_id", "host-b:2:bbbb")
    assert record_time_limit_kill(sessions, get_settings(), page_id).outcome is PageOutcome.retry
    [(status, failures, error)] = db_rows(
        "SELECT status::text, engine_failures, error FROM pages WHERE id = %s", page_id
    )
    assert (status, failures) == ("queued", 1) and "time limit" in error
