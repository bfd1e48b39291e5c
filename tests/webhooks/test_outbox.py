"""The outbox: one event per terminal transition, however often finalize runs, and the
reaper's sweep publishes what was committed but never published."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import httpx
import psycopg
import pytest
from standardwebhooks import Webhook

from pagemill.db.models import Job, Page
from pagemill.db.session import session_factory, session_scope
from pagemill.domain import JobStatus, LicenseUse, PageStatus, SourceKind
from pagemill.jobs.reaper import REAPER_LOCK_KEY
from pagemill.queue import publish_finalize
from pagemill.settings import get_settings
from pagemill.storage import JobKeys, ObjectStore
from pagemill.webhooks import outbox
from tests.conftest import TEST_ENV
from tests.webhooks.conftest import client_secret, sql
from tests.webhooks.receiver import Receiver
from worker.stages.context import StageContext
from worker.stages.finalize import finalize_job

pytestmark = pytest.mark.usefixtures("worker_process")


def job_ready_to_finalize(store: ObjectStore, api_key: str, webhook_url: str) -> uuid.UUID:
    """A running job whose two pages have both succeeded: all finalize has left to do."""
    [(client_id,)] = sql("SELECT id FROM clients WHERE api_key_prefix = %s", api_key.split("_")[1])
    job_id = uuid.uuid4()
    now = datetime.now(UTC)
    with session_scope() as session:
        session.add(
            Job(
                id=job_id,
                client_id=client_id,
                status=JobStatus.running,
                license_use=LicenseUse.commercial,
                engine="auto",
                webhook_url=webhook_url,
                caller_metadata={"batch": 7},
                source_kind=SourceKind.pdf,
                source_bytes=1,
                source_sha256="0" * 64,
                document_pages=2,
                pages_total=2,
                started_at=now,
            )
        )
        session.flush()
        for number in (1, 2):
            session.add(
                Page(
                    job_id=job_id,
                    number=number,
                    status=PageStatus.succeeded,
                    attempts=1,
                    engine="textlayer",
                    device_seconds=0.5,
                    cost_usd=Decimal("0.00000700"),
                    started_at=now,
                    finished_at=now,
                )
            )
    for number in (1, 2):
        store.put_bytes(
            JobKeys(job_id).page_markdown(number, None),
            f"# page {number}".encode(),
            "text/markdown",
        )
    return job_id


@contextmanager
def reaper_paused() -> Iterator[None]:
    """Hold the reaper's lock, so the worker's reaper cannot publish what a test
    wants its own sweep to find."""
    url = TEST_ENV["PAGEMILL_DATABASE_URL"].replace("+psycopg", "")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (REAPER_LOCK_KEY,))
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (REAPER_LOCK_KEY,))


def test_finalize_running_twice_sends_one_event(
    api: httpx.Client, api_key: str, receiver: Receiver, s3: ObjectStore
) -> None:
    job_id = job_ready_to_finalize(s3, api_key, receiver.url())
    ctx = StageContext(settings=get_settings(), sessions=session_factory(), store=s3)
    sessions = session_factory()
    with reaper_paused():
        with ThreadPoolExecutor(2) as pool:
            outcomes = list(pool.map(lambda _: finalize_job(ctx, job_id), range(2)))
        assert sorted(outcomes, key=str) == sorted([JobStatus.succeeded, None], key=str)
        # And through Celery, twice more: the job has ended, so nothing happens.
        publish_finalize(str(job_id))
        publish_finalize(str(job_id))
        time.sleep(2)

        assert sql("SELECT count(*) FROM webhook_events WHERE job_id = %s", job_id) == [(1,)]
        [(delivery_id, published_at)] = sql(
            "SELECT d.id, d.published_at FROM webhook_deliveries d "
            "JOIN webhook_events e ON e.id = d.event_id WHERE e.job_id = %s",
            job_id,
        )
        # finalize ran in-process, so no message was published: the reaper's sweep
        # does, once, without waiting for it to look lost.
        assert published_at is None
        assert outbox.publish_due_deliveries(sessions, timedelta(hours=1)) == [delivery_id]
        assert outbox.publish_due_deliveries(sessions, timedelta(hours=1)) == []

    [received] = receiver.wait_for(1)
    event = Webhook(client_secret(api_key)).verify(received.body, received.headers)
    assert event["type"] == "job.succeeded" and event["data"]["job_id"] == str(job_id)
    assert event["data"]["pages"]["succeeded"] == 2
    assert Decimal(event["data"]["cost_usd"]) == Decimal("0.00001400")
    assert event["data"]["metadata"] == {"batch": 7}
    time.sleep(2)
    assert len(receiver.requests) == 1
    assert outbox.publish_due_deliveries(sessions, timedelta(0)) == []  # settled


def reschedule(job_id: uuid.UUID, due_in_s: float, published_ago_s: float | None) -> None:
    sql(
        "UPDATE webhook_deliveries SET next_attempt_at = now() + make_interval(secs => %s), "
        "published_at = now() - make_interval(secs => %s) "
        "WHERE event_id IN (SELECT id FROM webhook_events WHERE job_id = %s) RETURNING id",
        due_in_s,
        published_ago_s,
        job_id,
    )


def test_sweep_publishes_far_retries_when_due_and_lost_messages_when_overdue(
    api: httpx.Client, api_key: str, receiver: Receiver, s3: ObjectStore
) -> None:
    job_id = job_ready_to_finalize(s3, api_key, receiver.url())
    ctx = StageContext(settings=get_settings(), sessions=session_factory(), store=s3)
    sessions = session_factory()
    with reaper_paused():
        assert finalize_job(ctx, job_id) is JobStatus.succeeded
        # A retry hours away is stored with no message: published when due, not before.
        reschedule(job_id, due_in_s=3600, published_ago_s=None)
        assert outbox.publish_due_deliveries(sessions, timedelta(minutes=2)) == []
        # A message published a while ago that never arrived: published again once overdue.
        reschedule(job_id, due_in_s=-90, published_ago_s=90)
        assert outbox.publish_due_deliveries(sessions, timedelta(minutes=2)) == []
        assert len(outbox.publish_due_deliveries(sessions, timedelta(minutes=1))) == 1
    receiver.wait_for(1)
    time.sleep(1)
    assert len(receiver.requests) == 1
