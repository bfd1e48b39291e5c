"""A job's event body can always be built, whatever metadata an older release stored."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from pagemill.db.models import Job
from pagemill.domain import JobStatus, LicenseUse
from pagemill.jobs.events import JobTotals, build_body
from pagemill.settings import Settings


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def _body(metadata: dict[str, Any]) -> dict[str, Any]:
    now = datetime.now(UTC)
    job = Job(
        id=uuid.uuid4(),
        status=JobStatus.succeeded,
        license_use=LicenseUse.non_commercial,
        caller_metadata=metadata,
        created_at=now,
        finished_at=now,
    )
    body = build_body(job, JobTotals({}, Decimal(0), 0.0), Settings(), None)
    return dict(json.loads(body)["data"])


def test_metadata_past_the_limits_is_sent_empty_not_a_failed_event() -> None:
    # 2,000 deep: json.dumps of it raised RecursionError and the event was never built.
    assert _body(_nested(2000))["metadata"] == {}


def test_metadata_within_the_limits_is_sent_as_stored() -> None:
    assert _body({"order": "PO-7", "lines": [1, 2.5, None]})["metadata"] == {
        "order": "PO-7",
        "lines": [1, 2.5, None],
    }
