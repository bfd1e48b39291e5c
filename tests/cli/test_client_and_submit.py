"""`pagemill client create`, `submit --wait` and `jobs` against the running API."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg

from tests.conftest import SAMPLES
from tests.support.services import ROOT


def pagemill(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_create_client_then_submit_and_wait(
    db: str, api_url: str, worker_process: object, tmp_path: Path
) -> None:
    created = pagemill("client", "create", "ledger-service")
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip().splitlines()[-1]
    assert key.startswith("pm_")
    with psycopg.connect(db.replace("+psycopg", "")) as conn:
        stored = conn.execute("SELECT clients::text FROM clients").fetchall()
    assert len(stored) == 1 and key not in stored[0][0]
    # The secret is everything after the prefix: token_urlsafe may put "_" in it too.
    assert key.split("_", 2)[2] not in stored[0][0]  # the secret part is nowhere in the row
    duplicate = pagemill("client", "create", "ledger-service")
    assert duplicate.returncode == 1 and "already exists" in duplicate.stdout

    env = {"PAGEMILL_API_BASE_URL": api_url, "PAGEMILL_API_KEY": key}
    out = tmp_path / "invoice.md"
    submitted = pagemill(
        "submit", str(SAMPLES / "invoice-multipage.pdf"), "--wait", "-o", str(out), env=env
    )
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    assert "succeeded" in submitted.stdout
    assert "INV/2023/03/0008" in out.read_text()

    listed = pagemill("jobs", "--status", "succeeded", env=env)
    assert listed.returncode == 0 and "succeeded" in listed.stdout

    refused = pagemill("jobs", env={**env, "PAGEMILL_API_KEY": "pm_nope_nope"})
    assert refused.returncode == 1 and "invalid_api_key" in refused.stdout
