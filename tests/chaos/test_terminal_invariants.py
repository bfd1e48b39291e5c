"""A terminal job has no page queued or running, however it ended: failed in prepare,
cancelled, or failed by finalize; and a page cannot be added to a job that has ended."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from pagemill.db.models import Job
from pagemill.db.session import session_factory, session_scope
from pagemill.domain import JobStatus, LicenseUse, SourceKind
from pagemill.jobs import repository
from pagemill.settings import get_settings
from pagemill.storage import get_object_store
from tests.chaos.conftest import db_rows
from tests.conftest import make_client_key
from worker.stages.context import StageContext
from worker.stages.finalize import fail_unstorable_job
from worker.stages.prepare import _fail as fail_in_prepare


def running_job_with_pages() -> uuid.UUID:
    """A running job of three pages: one succeeded, one queued, one running."""
    key = make_client_key()
    [(client_id,)] = db_rows(
        "SELECT id FROM clients WHERE api_key_prefix = %s", key.split("_")[1]
    )
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
        assert repository.cancel_job(session, job_id)


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
