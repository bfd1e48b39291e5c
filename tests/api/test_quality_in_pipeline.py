"""Page checks, scores and verdicts through the real pipeline; blank pages skip the engine."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pymupdf

from pagemill.storage import JobKeys, ObjectStore
from tests.conftest import SAMPLES, wait_for_job


def test_blank_page_is_empty_and_every_page_has_a_verdict(
    api: httpx.Client, worker_process: subprocess.Popen[bytes], s3: ObjectStore, tmp_path: Path
) -> None:
    document = pymupdf.open()
    document.new_page(width=595, height=842)  # blank: no ink at all
    page = document.new_page(width=595, height=842)
    page.insert_image(page.rect, filename=str(SAMPLES / "scanned-invoice.png"))
    path = tmp_path / "blank-then-scan.pdf"
    document.save(path)
    with path.open("rb") as handle:
        job = api.post("/v1/jobs", files={"file": (path.name, handle)}).json()
    job = wait_for_job(api, job["id"])
    assert job["status"] == "succeeded", job

    blank, scanned = job["page_details"]
    assert blank["quality"]["blank"] is True
    assert blank["output_chars"] == 0
    assert blank["quality"]["verdict"] == "ok"
    assert blank["device_seconds"] == 0  # no engine ran
    assert api.get(f"/v1/jobs/{job['id']}/pages/1/markdown").text == ""

    assert scanned["quality"]["blank"] is False
    assert scanned["quality"]["verdict"] in ("ok", "repaired", "degraded")
    names = {check["name"] for check in scanned["quality"]["checks"]}
    assert names == {
        "repetition",
        "tables",
        "latex",
        "truncation",
        "empty_output",
        "blank_invented",
        "orientation",  # what was found, and done, before OCR
    }
    assert 0.0 <= scanned["quality"]["score"] <= 1.0

    assert job["quality"]["pages_by_verdict"]["ok"] >= 1
    assert job["quality"]["score"] is not None
    manifest = json.loads(s3.get_bytes(JobKeys(job["id"]).manifest))
    assert manifest["quality"]["verdict"] == job["quality"]["verdict"]
    assert [p["quality"]["verdict"] for p in manifest["pages"]] == [
        blank["quality"]["verdict"],
        scanned["quality"]["verdict"],
    ]
