"""`pagemill submit --wait` stops at every way a job can end, purged included."""

from __future__ import annotations

import subprocess

import httpx

from cli.main import _wait_for
from tests.conftest import SAMPLES, wait_for_job


def test_waiting_ends_on_a_purged_job(
    api: httpx.Client, worker_process: subprocess.Popen[bytes]
) -> None:
    sent = api.post(
        "/v1/jobs",
        files={"file": ("letter.pdf", (SAMPLES / "invoice-multipage.pdf").read_bytes())},
    )
    assert sent.status_code == 202, sent.text
    job_id = sent.json()["id"]
    wait_for_job(api, job_id)
    purged = api.delete(f"/v1/jobs/{job_id}", params={"purge": "true"})
    assert purged.status_code == 200, purged.text

    ended = _wait_for(api, job_id, total=1)
    assert ended["status"] == "purged"
