"""Every ops view returns exactly what tests/ops/conftest.py inserted, by hand."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest

from pagemill.db.session import session_scope
from pagemill.ops.catalog import VIEWS
from pagemill.ops.repository import UnknownView, json_safe, read_rows, read_view
from tests.ops.conftest import JINA_REFERENCE, OpsWorld

approx = pytest.approx


def rows(name: str, **kwargs: Any) -> list[dict[str, Any]]:
    with session_scope() as session:
        return read_rows(session, name, **kwargs)


def test_jobs_by_client_and_state(ops_world: OpsWorld) -> None:
    assert rows("jobs-by-client") == [
        {"client": "acme", "status": "queued", "jobs": 1, "pages": 1},
        {"client": "acme", "status": "running", "jobs": 1, "pages": 2},
        {"client": "acme", "status": "succeeded", "jobs": 2, "pages": 4},
        {"client": "globex", "status": "succeeded", "jobs": 1, "pages": 2},
        {"client": "globex", "status": "failed", "jobs": 1, "pages": 2},
    ]


def test_stuck_jobs_oldest_first_with_the_stuck_flag(ops_world: OpsWorld) -> None:
    stuck, fresh = rows("stuck-jobs")
    assert {key: stuck[key] for key in ("job_id", "client", "status", "stuck")} == {
        "job_id": str(ops_world.stuck_job),
        "client": "acme",
        "status": "running",
        "stuck": True,
    }
    assert (stuck["pages_total"], stuck["pages_done"], stuck["pages_running"]) == (2, 1, 1)
    # numeric: exact strings. The job was made 30 minutes ago; its pages last moved 15.
    assert float(stuck["age_seconds"]) == approx(1800, abs=30)
    assert float(stuck["idle_seconds"]) == approx(900, abs=30)
    assert datetime.fromisoformat(stuck["created_at"]) < datetime.fromisoformat(fresh["created_at"])
    assert fresh["job_id"] == str(ops_world.fresh_job)
    assert (fresh["status"], fresh["stuck"], fresh["pages_done"], fresh["pages_running"]) == (
        "queued",
        False,
        0,
        0,
    )
    assert float(fresh["idle_seconds"]) == approx(60, abs=30)
    assert fresh["started_at"] is None


def test_cost_by_client_by_day_counts_succeeded_pages_only(ops_world: OpsWorld) -> None:
    assert rows("cost-by-client-day") == [
        # 2 s + 3 s on CPU at 0.36 $/h, 0.5 s on an L4 at 0.72 $/h
        {
            "client": "acme",
            "day": "2026-11-30",
            "pages": 3,
            "device_seconds": approx(5.5),
            "cost_usd": "0.0006",
        },
        # 0.25 s on an L4; 4 s on CPU (the running job's finished page)
        {
            "client": "acme",
            "day": "2026-12-01",
            "pages": 2,
            "device_seconds": approx(4.25),
            "cost_usd": "0.00045",
        },
        # commercial pages on the licensed A100; the failed CPU page is not counted
        {
            "client": "globex",
            "day": "2026-12-01",
            "pages": 2,
            "device_seconds": approx(0.5),
            "cost_usd": "0.0002",
        },
    ]


def test_cost_per_page_by_model_and_device(ops_world: OpsWorld) -> None:
    assert rows("cost-per-page") == [
        {
            "model": "jina-ocr-v1",
            "device_kind": "nvidia-a100-40gb",
            "pages": 2,
            "device_seconds_per_page": approx(0.25),
            "cost_usd_per_page": "0.0001",
            "cost_usd": "0.0002",
            "output_tokens_per_page": "600",
        },
        {
            "model": "jina-ocr-v1",
            "device_kind": "nvidia-l4",
            "pages": 2,
            "device_seconds_per_page": approx(0.375),
            "cost_usd_per_page": "0.000075",
            "cost_usd": "0.00015",
            "output_tokens_per_page": "700",
        },
        {
            "model": "rapidocr-3.10.0",
            "device_kind": "cpu",
            "pages": 3,
            "device_seconds_per_page": approx(3.0),
            "cost_usd_per_page": "0.0003",
            "cost_usd": "0.0009",
            "output_tokens_per_page": None,
        },
    ]


def test_licence_audit_groups_pages_by_basis_and_use(ops_world: OpsWorld) -> None:
    jina = {"model": "jina-ocr-v1", "model_license": "CC-BY-NC-4.0"}
    assert rows("licence-audit") == [
        {
            **jina,
            "deployment_license_reference": JINA_REFERENCE,
            "basis_permits_commercial": True,
            "license_use": "commercial",
            "pages": 2,
        },
        {
            **jina,
            "deployment_license_reference": None,
            "basis_permits_commercial": False,
            "license_use": "non_commercial",
            "pages": 2,
        },
        {
            "model": "rapidocr-3.10.0",
            "model_license": "Apache-2.0",
            "deployment_license_reference": None,
            "basis_permits_commercial": True,
            "license_use": "non_commercial",
            "pages": 3,
        },
    ]


def test_worker_utilisation_busy_idle_and_all_in_cost(ops_world: OpsWorld) -> None:
    # Other processes of a test session may register real workers; only ours are checked.
    found = [row for row in rows("worker-utilisation") if row["worker_id"] in ops_world.worker_ids]
    assert [row["worker_id"] for row in found] == list(ops_world.worker_ids)  # newest first
    silent, live, stopped = found
    measured = ("alive", "pages_done", "busy_seconds", "idle_seconds", "utilisation")
    # 1 L4 for 3600 s, 1800 s busy; 3600 s x 0.72 $/h over 3600 pages
    assert [live[key] for key in measured] == [True, 3600, 1800.0, approx(1800.0), approx(0.5)]
    assert (live["price_usd_per_hour"], live["all_in_cost_usd_per_page"]) == ("0.72", "0.0002")
    # 2 CPUs for 7200 s, 3600 s busy; 14400 device s x 0.36 $/h over 1200 pages
    assert [stopped[key] for key in measured] == [False, 1200, 3600.0, approx(10800.0), 0.25]
    assert stopped["all_in_cost_usd_per_page"] == "0.0012"
    assert stopped["stopped_at"] is not None and stopped["device_count"] == 2
    # no heartbeat for 5 minutes: not alive; idle all its 600 s; no page, so no cost per page
    assert [silent[key] for key in measured] == [False, 0, 0.0, approx(600.0), 0.0]
    assert silent["all_in_cost_usd_per_page"] is None
    assert (live["host"], live["device_kind"], live["model"]) == (
        "ops-gpu-live.example",
        "nvidia-l4",
        "jina-ocr-v1",
    )
    heartbeat = datetime.fromisoformat(live["heartbeat_at"]).timestamp()
    assert heartbeat == approx(ops_world.now.timestamp() - 10, abs=0.01)


def test_limit_offset_unknown_names_and_json_safety(ops_world: OpsWorld) -> None:
    everything = rows("jobs-by-client")
    assert rows("jobs-by-client", limit=2, offset=1) == everything[1:3]
    with session_scope() as session, pytest.raises(UnknownView):
        read_view(session, "ops_jobs_by_client_state")
    with session_scope() as session:
        for name in VIEWS:
            found = read_view(session, name)
            assert found.columns and all(list(row) == found.columns for row in found.rows)
    assert json_safe(Decimal("0.00001050000000000000")) == "0.0000105"
    assert json_safe(Decimal("1E+2")) == "100"
    assert json_safe(Decimal("0E-8")) == "0"
