"""A terminal job has no page queued or running, however it ended: failed in prepare,
cancelled, or failed by finalize; and a page cannot be added to a job that has ended."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import redis

from pagemill.db.models import Job
from pagemill.db.session import session_factory, session_scope
from pagemill.domain import JobStatus, LicenseUse, SourceKind
from pagemill.jobs import lifecycle, repository
from pagemill.settings import get_settings
from pagemill.storage import get_object_store
from tests.chaos.conftest import db_rows, wait_terminal
from tests.chaos.test_lost_and_killed import submit
from tests.conftest import SAMPLES, make_client_key
from worker.stages.context import StageContext
from worker.stages.finalize import fail_unstorable_job
from worker.stages.prepare import _fail as fail_in_prepare


def running_job_with_pages() -> uuid.UUID:
    """A running job of three pages: one succeeded, one queued, one running."""
    key = make_client_key()
    [(client_id,)] = db_rows("SELECT id FROM clients WHERE api_key_prefix = %s", key.split("_")[1])
    job_id = uuid.uuid4()
    with session_scope() as session:
        session.add(
            Job(
                id=job_id,
                client_id=client_id,
                status=JobStatus.running,
                license_use=LicenseUse.non_commercial,
                engine="auto",
                source_kind=SourceKind.pdf,
                source_bytes=1,
                source_sha256="0" * 64,
                document_pages=3,
                pages_total=3,
            )
        )
    sessions = session_factory()
    lease = timedelta(seconds=60)
    with sessions.begin() as session:
        for number in (1, 2, 3):
            repository.insert_page(session, {"job_id": job_id, "number": number})
        ids = [page.id for page in repository.list_pages(session, job_id)]
    with sessions.begin() as session:
        done = repository.claim_page(session, ids[0], lease)
        assert done is not None
        repository.finish_page(session, done, {"status": "succeeded"})
        assert repository.claim_page(session, ids[2], lease) is not None
    return job_id


def _context() -> StageContext:
    return StageContext(get_settings(), session_factory(), get_object_store())


def _cancel(job_id: uuid.UUID) -> None:
    with session_factory().begin() as session:
        assert lifecycle.cancel_job(session, job_id)


ENDINGS: dict[str, Callable[[uuid.UUID], Any]] = {
    "failed in prepare": lambda job_id: fail_in_prepare(_context(), job_id, "unreadable"),
    "cancelled": _cancel,
    "failed by finalize": lambda job_id: fail_unstorable_job(_context(), job_id, "S3 down"),
}


@pytest.mark.parametrize("ending", ENDINGS)
def test_a_job_that_ends_leaves_no_page_unfinished(db: str, ending: str) -> None:
    job_id = running_job_with_pages()
    ENDINGS[ending](job_id)
    [(job_status,)] = db_rows("SELECT status::text FROM jobs WHERE id = %s", job_id)
    assert job_status in ("failed", "cancelled")
    pages = db_rows(
        "SELECT number, status::text, error FROM pages WHERE job_id = %s ORDER BY number", job_id
    )
    assert [(number, status) for number, status, _ in pages] == [
        (1, "succeeded"),
        (2, "cancelled"),
        (3, "cancelled"),
    ]
    assert all(error.startswith(f"Not run: the job {job_status}") for *_, error in pages[1:])


def test_no_page_is_added_to_a_job_that_has_ended(db: str) -> None:
    job_id = running_job_with_pages()
    _cancel(job_id)
    with session_factory().begin() as session:
        repository.insert_page(session, {"job_id": job_id, "number": 4})
    assert db_rows("SELECT 1 FROM pages WHERE job_id = %s AND number = 4", job_id) == []


def _task_args(raw: bytes) -> list[Any]:
    """The args of a Celery message as Redis holds it (list entries, and the `unacked`
    hash's [message, exchange, routing key] entries); [] for anything else kept there."""
    try:
        message = json.loads(raw)
        if isinstance(message, list):
            message = message[0]
        return list(json.loads(base64.b64decode(message["body"]))[0])
    except (ValueError, TypeError, KeyError, IndexError):
        return []


def queued_messages(url: str) -> list[list[Any]]:
    client = redis.Redis.from_url(url)
    found = []
    for key in client.keys("*"):
        kind = client.type(key)
        if kind == b"list":
            found += [_task_args(raw) for raw in client.lrange(key, 0, -1)]
        elif kind == b"hash" and key == b"unacked":
            found += [_task_args(raw) for raw in client.hvals(key)]
    return found


def test_no_message_outlives_its_job(stack_factory: Any) -> None:
    stack, _, _ = stack_factory()
    stack.start_api()
    with stack.client() as client:
        finished = submit(client, SAMPLES / "invoice-multipage.pdf")
        cancelled = submit(client, SAMPLES / "invoice-multipage.pdf")
        # The scan below sees messages when there are some: both prepares wait here.
        waiting = {str(args[0]) for args in queued_messages(stack.redis_server.url) if args}
        assert {finished, cancelled} <= waiting
        assert client.delete(f"/v1/jobs/{cancelled}").status_code == 200
    stack.start_worker()
    assert wait_terminal(finished, 120) == "succeeded"
    assert wait_terminal(cancelled, 30) == "cancelled"
    ids = {finished, cancelled} | {
        str(page_id)
        for (page_id,) in db_rows(
            "SELECT id FROM pages WHERE job_id IN (%s, %s)", finished, cancelled
        )
    }
    # Past the reaper's interval (1 s) and the stale period (3 s) twice over: anything
    # it would republish, it has.
    time.sleep(8)
    messages = queued_messages(stack.redis_server.url)
    leftovers = [args for args in messages if args and str(args[0]) in ids]
    assert leftovers == []
