"""Prepare's batches of pages (worker.stages.page_batches) on real Postgres, Redis and
S3: each page recorded once and queued once, with the fences a page had on its own."""

from __future__ import annotations

import base64
import json
import time
import uuid
from typing import Any

import pytest
import redis
from sqlalchemy import func, select, update

from pagemill.clients.repository import create_client
from pagemill.db.models import Job, Page
from pagemill.db.session import session_factory
from pagemill.domain import JobStatus, LicenseUse, QueuedPage
from pagemill.engines.catalog import ocr_stage
from pagemill.jobs import repository
from pagemill.queue import OCR_TASK, publish_ocr_pages
from pagemill.settings import get_settings
from pagemill.storage import JobKeys, ObjectStore
from worker.stages import page_batches
from worker.stages.page_batches import JobEnded, PageBatches, PreparedPage


def _running_job() -> uuid.UUID:
    with session_factory().begin() as session:
        client, _ = create_client(session, f"batches-{uuid.uuid4().hex[:8]}")
        job = Job(
            client_id=client.id,
            status=JobStatus.running,
            license_use=LicenseUse.non_commercial,
            engine="auto",
            source_sha256="0" * 64,
        )
        session.add(job)
        session.flush()
        return job.id


def _page(number: int, engine: str | None = "rapidocr", written: list[str] | None = None) -> Any:
    row = {
        "number": number,
        "width_pt": 595.0,
        "height_pt": 842.0,
        "image_width_px": 1240,
        "image_height_px": 1754,
        "image_dpi": 150,
        "text_chars": 10,
        "image_coverage": 0.0,
        "facts": {"number": number},
        "render_seconds": 0.01,
        "engine": engine,
        "engine_reason": "test",
        "license_use": LicenseUse.non_commercial,
    }
    return PreparedPage(row, engine, written or [])


class _Published:
    def __init__(self) -> None:
        self.batches: list[list[QueuedPage]] = []

    def __call__(self, pages: Any) -> None:
        self.batches.append(list(pages))


def _batches(store: ObjectStore, job_id: uuid.UUID, publish: Any, session: Any) -> PageBatches:
    return PageBatches(store, session, job_id, publish)


def _stored_numbers(job_id: uuid.UUID) -> list[int]:
    with session_factory()() as session:
        return sorted(session.scalars(select(Page.number).where(Page.job_id == job_id)))


def _numbers_by_id(job_id: uuid.UUID) -> dict[int, int]:
    with session_factory()() as session:
        rows = session.execute(select(Page.id, Page.number).where(Page.job_id == job_id))
        return {page_id: number for page_id, number in rows.tuples()}


def test_a_full_batch_is_recorded_and_queued_at_once_and_the_rest_when_flushed(
    db: str, s3: ObjectStore
) -> None:
    job_id = _running_job()
    published = _Published()
    with repository.autocommit(session_factory()) as session:
        batches = _batches(s3, job_id, published, session)
        for number in range(1, page_batches.BATCH_PAGES + 3):
            batches.add(_page(number))
        assert [len(batch) for batch in published.batches] == [page_batches.BATCH_PAGES]
        batches.flush()
    assert [len(batch) for batch in published.batches] == [page_batches.BATCH_PAGES, 2]
    assert _stored_numbers(job_id) == list(range(1, page_batches.BATCH_PAGES + 3))
    queued = [page for batch in published.batches for page in batch]
    ids = _numbers_by_id(job_id)
    assert sorted(ids[page.page_id] for page in queued) == _stored_numbers(job_id)
    assert batches.published == set(ids)


def test_a_page_waits_for_its_batch_no_longer_than_the_wait(db: str, s3: ObjectStore) -> None:
    job_id = _running_job()
    published = _Published()
    with repository.autocommit(session_factory()) as session:
        batches = _batches(s3, job_id, published, session)
        batches.add(_page(1))
        batches.flush_if_waited()
        assert published.batches == []  # not waited yet
        time.sleep(page_batches.BATCH_WAIT_S)
        batches.flush_if_waited()
        assert [[page.engine for page in batch] for batch in published.batches] == [["rapidocr"]]


def test_pages_an_earlier_attempt_recorded_are_not_queued_again(db: str, s3: ObjectStore) -> None:
    job_id = _running_job()
    with repository.autocommit(session_factory()) as session:
        earlier = _batches(s3, job_id, _Published(), session)
        earlier.add(_page(2))
        earlier.flush()
        earlier.flush()  # nothing pending: a no-op
    published = _Published()
    with repository.autocommit(session_factory()) as session:
        batches = _batches(s3, job_id, published, session)
        for number in (1, 2, 3):
            batches.add(_page(number))
        # A page prepare routed to no engine is recorded and not queued.
        batches.add(_page(4, engine=None))
        batches.flush()
    assert _stored_numbers(job_id) == [1, 2, 3, 4]
    numbers = _numbers_by_id(job_id)
    assert sorted(numbers[page.page_id] for page in published.batches[0]) == [1, 3]


def test_a_job_that_ended_records_nothing_and_a_purged_ones_objects_are_removed(
    db: str, s3: ObjectStore
) -> None:
    job_id = _running_job()
    keys = JobKeys(job_id)
    s3.put_bytes(keys.page_image(1), b"png", "image/png")
    with session_factory().begin() as session:
        session.execute(
            update(Job)
            .where(Job.id == job_id)
            .values(status=JobStatus.cancelled, purged_at=func.now())
        )
    published = _Published()
    with repository.autocommit(session_factory()) as session:
        batches = _batches(s3, job_id, published, session)
        with pytest.raises(JobEnded):
            batches.add(_page(1, written=[keys.page_image(1)]))
            batches.flush()
    assert _stored_numbers(job_id) == []
    assert published.batches == []
    assert s3.get_bytes_if_stored(keys.page_image(1)) is None


def test_a_batch_of_messages_reaches_each_pages_queue_with_its_marker(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = get_settings()
    # Queues of this test's own: the session's workers consume the shared ones.
    monkeypatch.setattr(settings, "queue_prefix", f"{settings.queue_prefix}batch-{uuid.uuid4()}-")
    pages = [
        QueuedPage(9001, "rapidocr", LicenseUse.non_commercial),
        QueuedPage(9002, "textlayer", LicenseUse.non_commercial),
        QueuedPage(9003, "rapidocr", LicenseUse.commercial),
    ]
    queues = {settings.queue(ocr_stage(p.engine, p.license_use)) for p in pages}
    for queue in queues:
        redis_client.delete(queue)
    publish_ocr_pages(pages)
    found: dict[int, str] = {}
    for queue in queues:
        for raw in redis_client.lrange(queue, 0, -1):  # type: ignore[union-attr]
            message = json.loads(raw)
            assert message["headers"]["task"] == OCR_TASK
            [page_id] = json.loads(base64.b64decode(message["body"]))[0]
            found[page_id] = queue
        redis_client.delete(queue)
    assert found == {p.page_id: settings.queue(ocr_stage(p.engine, p.license_use)) for p in pages}
    markers = [f"{settings.queue_prefix}ocr-pending:{p.page_id}" for p in pages]
    assert all(redis_client.ttl(marker) > 0 for marker in markers)
    redis_client.delete(*markers)
