"""`pagemill ops NAME` prints each view as a table, or as JSON with --json."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

from typer.testing import CliRunner

from cli.main import app
from pagemill.db.session import session_scope
from pagemill.ops.catalog import VIEWS
from pagemill.ops.repository import read_rows
from tests.cli.test_client_and_submit import pagemill
from tests.ops.conftest import JINA_REFERENCE, OpsWorld, steady

# What each table must show, from the rows of tests/ops/conftest.py.
EXPECTED_CELLS = {
    "jobs-by-client": ["acme", "globex", "queued", "running", "succeeded", "failed"],
    "stuck-jobs": ["running", "queued", "yes", "no"],
    "cost-by-client-day": ["2026-11-30", "2026-12-01", "5.500", "4.250", "0.0006", "0.00045"],
    "cost-per-page": ["jina-ocr-v1", "nvidia-a100-40gb", "0.375", "0.000075", "0.0009", "700"],
    "licence-audit": [JINA_REFERENCE, "CC-BY-NC-4.0", "Apache-2.0", "commercial"],
    "worker-utilisation": ["ops-gpu-live", "1800.000", "10800.000", "0.250", "0.0002", "0.0012"],
    "page-usage": ["acme", "globex", "pages_today", "jobs_purged"],
}


def test_every_view_prints_as_a_table(ops_world: OpsWorld) -> None:
    runs = [(name, False) for name in VIEWS] + [("worker-utilisation", True)]

    def run(args: tuple[str, bool]) -> subprocess.CompletedProcess[str]:
        name, as_json = args
        return pagemill("ops", name, *(["--json"] if as_json else []))

    # Side by side: each run is mostly interpreter start-up.
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip(runs, pool.map(run, runs), strict=True))

    for (name, as_json), result in results.items():
        assert result.returncode == 0, (name, result.stdout, result.stderr)
        if not as_json:
            assert VIEWS[name].title in result.stdout, result.stdout
            for cell in EXPECTED_CELLS[name]:
                assert cell in result.stdout, (name, cell, result.stdout)

    workers = json.loads(results[("worker-utilisation", True)].stdout)["rows"]
    live = next(row for row in workers if row["worker_id"] == "ops-gpu-live")
    assert (live["utilisation"], live["all_in_cost_usd_per_page"]) == (0.5, "0.0002")


def test_json_output_is_the_rows_of_the_view(ops_world: OpsWorld) -> None:
    # In this process (the subprocess path is covered above): --json for every view.
    runner = CliRunner()
    for name in VIEWS:
        result = runner.invoke(app, ["ops", name, "--json", "--limit", "2"])
        assert result.exit_code == 0, result.output
        body = json.loads(result.stdout)
        with session_scope() as session:
            expected = read_rows(session, name, limit=2)
        assert body["view"] == name and body["rows"], name
        assert all(list(row) == body["columns"] for row in body["rows"])
        assert steady(body["rows"]) == steady(expected), name
    stuck = json.loads(runner.invoke(app, ["ops", "stuck-jobs", "--json"]).stdout)["rows"]
    assert [(row["job_id"], row["stuck"]) for row in stuck] == [
        (str(ops_world.stuck_job), True),
        (str(ops_world.fresh_job), False),
    ]


def test_an_unreachable_database_is_a_message_not_a_traceback() -> None:
    result = pagemill(
        "ops",
        "stuck-jobs",
        env={"PAGEMILL_DATABASE_URL": "postgresql+psycopg://postgres@127.0.0.1:1/none"},
    )
    assert result.returncode == 1
    assert "Could not read the database" in result.stdout
    assert "Traceback" not in result.stderr
