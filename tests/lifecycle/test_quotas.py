"""Page quotas: exact under parallel submissions at the boundary, refused with when the
quota resets and how much is left, and nothing created for a refused submission."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any

import httpx
from minio import Minio

from pagemill.clients import quotas
from pagemill.db.models import Client
from pagemill.db.session import session_factory
from pagemill.domain import JobStatus
from pagemill.ops.repository import read_rows
from pagemill.settings import get_settings
from tests.conftest import S3_ACCESS_KEY, S3_SECRET_KEY, TEST_ENV, make_client_key
from tests.lifecycle.conftest import sql, submit
from tests.support.factories import add_job

PARALLEL = 8
QUOTA_DAY = 5


def test_parallel_submissions_at_the_boundary_take_exactly_the_quota(
    api: httpx.Client, api_key: str
) -> None:
    (client_id,) = sql("SELECT id FROM clients")[0]
    sql("UPDATE clients SET page_quota_day = %s, page_quota_month = 100", QUOTA_DAY)
    # One page already used today: four remain, and eight one-page jobs race for them.
    assert submit(api, pages="1", cache="false").status_code == 202
    usage = api.get("/v1/usage").json()
    assert (usage["day"]["used"], usage["day"]["remaining"]) == (1, QUOTA_DAY - 1)

    jobs_before = stored_job_ids()
    answers: list[httpx.Response] = []
    start = threading.Barrier(PARALLEL)

    def race() -> None:
        with httpx.Client(
            base_url=str(api.base_url), headers={"Authorization": f"Bearer {api_key}"}, timeout=60
        ) as own:
            start.wait()
            answers.append(submit(own, pages="1", cache="false"))

    threads = [threading.Thread(target=race) for _ in range(PARALLEL)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    accepted = [a for a in answers if a.status_code == 202]
    refused = [a for a in answers if a.status_code != 202]
    assert len(accepted) == QUOTA_DAY - 1, [a.text for a in answers]
    assert all(a.status_code == 429 for a in refused), [a.text for a in refused]
    for answer in refused:
        error: dict[str, Any] = answer.json()["error"]
        assert error["code"] == "quota_exceeded"
        assert (error["period"], error["limit"], error["used"]) == ("day", QUOTA_DAY, QUOTA_DAY)
        assert (error["remaining"], error["requested"]) == (0, 1)
        resets_at = datetime.fromisoformat(error["resets_at"])
        assert resets_at > datetime.now(UTC) and resets_at.time().hour == 0
        assert 0 < int(answer.headers["retry-after"]) <= 24 * 3600
    # Nothing half-created: the jobs table holds exactly what was accepted.
    assert sql("SELECT count(*), sum(pages_total) FROM jobs WHERE client_id = %s", client_id) == [
        (QUOTA_DAY, QUOTA_DAY)
    ]
    assert stored_job_ids() - jobs_before == {a.json()["id"] for a in accepted}
    usage = api.get("/v1/usage").json()
    assert usage["day"] == {**usage["day"], "limit": QUOTA_DAY, "used": QUOTA_DAY, "remaining": 0}
    assert (usage["month"]["limit"], usage["month"]["used"]) == (100, QUOTA_DAY)
    with session_factory()() as session:
        (row,) = read_rows(session, "page-usage")
    assert (row["pages_today"], row["pages_this_month"]) == (QUOTA_DAY, QUOTA_DAY)
    assert (row["page_quota_day"], row["page_quota_month"]) == (QUOTA_DAY, 100)
    for job in [a.json() for a in accepted]:
        api.delete(f"/v1/jobs/{job['id']}")  # the session's worker need not run them


def stored_job_ids() -> set[str]:
    """The jobs that have objects in the bucket: a refused submission must leave none."""
    s3 = Minio(TEST_ENV["PAGEMILL_S3_ENDPOINT"], S3_ACCESS_KEY, S3_SECRET_KEY, secure=False)
    # Objects, not the folders a listing shows: the store may list a folder emptied a
    # moment ago until it tidies it away.
    stored = s3.list_objects(TEST_ENV["PAGEMILL_S3_BUCKET"], "jobs/", recursive=True)
    return {(item.object_name or "").split("/")[1] for item in stored}


def test_the_check_and_the_insert_are_one_step_for_concurrent_submitters(db: str) -> None:
    # The API's window between the check and the commit is short; here every submitter
    # holds it open a while, so without the lock all of them would pass the check.
    make_client_key("quota-race")
    sql("UPDATE clients SET page_quota_day = 3")
    (client_id,) = sql("SELECT id FROM clients")[0]
    settings, sessions = get_settings(), session_factory()
    admitted: list[bool] = []
    start = threading.Barrier(6)

    def submitter() -> None:
        with sessions() as session:
            client = session.get(Client, client_id)
            assert client is not None
            start.wait()
            try:
                quotas.check_pages(session, settings, client, 1, lock=True)
            except quotas.QuotaExceeded:
                admitted.append(False)
                return
            add_job(session, client_id, [{}], status=JobStatus.cancelled)
            time.sleep(0.3)  # storing the source, answering the idempotency key...
            session.commit()
            admitted.append(True)

    threads = [threading.Thread(target=submitter) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(admitted) == [False, False, False, True, True, True]


def test_a_job_over_the_monthly_quota_is_refused_with_the_months_reset(
    api: httpx.Client,
) -> None:
    sql("UPDATE clients SET page_quota_month = 2")
    answer = submit(api, pages="1-3")
    assert answer.status_code == 429, answer.text
    error = answer.json()["error"]
    assert (error["period"], error["remaining"], error["requested"]) == ("month", 2, 3)
    assert datetime.fromisoformat(error["resets_at"]).day == 1
    assert sql("SELECT count(*) FROM jobs") == [(0,)]
    usage = api.get("/v1/usage").json()
    assert usage["day"]["limit"] is None and usage["month"]["remaining"] == 2
