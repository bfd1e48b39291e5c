"""extract=invoice through the real API, a real worker, Redis, Postgres and S3."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pymupdf

from pagemill.storage import JobKeys, ObjectStore
from tests.conftest import wait_for_job
from tests.invoices.support import CORPUS


def two_invoices(tmp_path: Path) -> Path:
    joined = pymupdf.open()
    for name in ("coolblue1", "saeco"):
        with pymupdf.open(CORPUS / f"{name}.pdf") as document:
            joined.insert_pdf(document)
    path = tmp_path / "two-invoices.pdf"
    joined.save(path)
    return path


def submit(api: httpx.Client, path: Path, **data: str) -> httpx.Response:
    with path.open("rb") as handle:
        return api.post("/v1/jobs", files={"file": (path.name, handle)}, data=data)


def test_a_file_of_two_invoices_gives_both(
    api: httpx.Client, worker_process: subprocess.Popen[bytes], s3: ObjectStore, tmp_path: Path
) -> None:
    response = submit(api, two_invoices(tmp_path), extract="invoice")
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    early = api.get(f"/v1/jobs/{job_id}/invoice")
    if api.get(f"/v1/jobs/{job_id}").json()["status"] in ("queued", "running"):
        assert early.status_code == 409
        assert early.json()["error"]["code"] == "invoice_not_ready"

    assert wait_for_job(api, job_id)["status"] == "succeeded"
    answer = api.get(f"/v1/jobs/{job_id}/invoice")
    assert answer.status_code == 200, answer.text
    assert answer.content == s3.get_bytes(JobKeys(job_id).invoice)
    invoices = answer.json()["invoices"]
    assert [(i["first_page"], i["last_page"]) for i in invoices] == [(1, 1), (2, 2)]
    first, second = invoices
    assert first["fields"]["invoice_number"]["value"] == "993548900"
    assert first["fields"]["total"]["value"] == "717.97"
    assert first["fields"]["currency"]["value"] == "EUR"
    assert first["fields"]["issue_date"]["value"] == "2014-04-19"
    assert second["fields"]["invoice_number"]["value"] == "VF1005193039"
    assert second["fields"]["total"]["page"] == 2
    assert [i["verdict"] for i in invoices] == ["consistent", "consistent"]
    assert len(first["line_items"]) == 6


def test_the_invoice_answers_with_clear_codes(
    api: httpx.Client, worker_process: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    refused = submit(api, CORPUS / "oyo.pdf", extract="receipt")
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "invalid_extract"
    assert api.get("/v1/jobs", params={"limit": 5}).json()["jobs"] == []  # nothing created

    plain = submit(api, CORPUS / "oyo.pdf")
    assert plain.status_code == 202, plain.text
    job_id = plain.json()["id"]
    assert wait_for_job(api, job_id)["status"] == "succeeded"
    missing = api.get(f"/v1/jobs/{job_id}/invoice")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "invoice_not_requested"
