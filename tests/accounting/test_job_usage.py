"""A job's device seconds under one name: usage.device_seconds in the job status and
device_seconds in the event, with the old compute_seconds kept for one release,
marked deprecated in the OpenAPI document and always the same number."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from decimal import Decimal

import httpx
import pytest

from pagemill.domain import JobStatus, LicenseUse
from pagemill.jobs.events import JobTotals, build_body
from pagemill.settings import Settings
from tests.support.factories import add_job

PAGE_SECONDS = (1.25, 0.5)


def test_openapi_marks_compute_seconds_deprecated(api: httpx.Client) -> None:
    schemas = api.get("/openapi.json").json()["components"]["schemas"]
    job = schemas["JobOut"]["properties"]
    assert job["compute_seconds"].get("deprecated") is True
    assert not schemas["UsageOut"]["properties"]["device_seconds"].get("deprecated")


def test_job_status_reports_the_same_device_seconds_under_both_names(
    api: httpx.Client, api_key: str
) -> None:
    from pagemill.db.models import Client
    from pagemill.db.session import session_scope

    with session_scope() as session:
        [client] = session.query(Client).all()
        pages = [
            {"engine": "rapidocr", "device_seconds": seconds, "cost_usd": Decimal("0.00000100")}
            for seconds in PAGE_SECONDS
        ]
        job_id = add_job(session, client.id, pages).id
    body = api.get(f"/v1/jobs/{job_id}").json()
    assert body["usage"]["device_seconds"] == pytest.approx(sum(PAGE_SECONDS))
    assert body["compute_seconds"] == body["usage"]["device_seconds"]
    assert Decimal(body["cost_usd"]) == Decimal("0.00000200")
    for page, seconds in zip(body["page_details"], PAGE_SECONDS, strict=True):
        assert page["device_seconds"] == page["compute_seconds"] == seconds


def test_the_event_reports_the_same_device_seconds_under_both_names() -> None:
    from pagemill.db.models import Job

    now = datetime.now(UTC)
    job = Job(
        id=uuid.uuid4(),
        status=JobStatus.succeeded,
        license_use=LicenseUse.non_commercial,
        caller_metadata={},
        created_at=now,
        finished_at=now,
    )
    body = build_body(job, JobTotals({}, Decimal(0), 1.7504), Settings(), None)
    data = json.loads(body)["data"]
    assert data["device_seconds"] == data["compute_seconds"] == 1.75
