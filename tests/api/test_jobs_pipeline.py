"""Jobs through the real API, a real Celery worker, Redis, Postgres and S3."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import httpx
import psycopg

from pagemill.storage import JobKeys, ObjectStore
from tests.conftest import FIXTURES, SAMPLES, TEST_ENV, wait_for_job

INVOICE = SAMPLES / "invoice-multipage.pdf"
EXPECTED = json.loads((FIXTURES / "corpus" / "AzureInterior.json").read_text())[0]


def page_rows(job_id: str) -> list[dict[str, Any]]:
    url = TEST_ENV["PAGEMILL_DATABASE_URL"].replace("+psycopg", "")
    with psycopg.connect(url) as conn:
        cursor = conn.execute("SELECT * FROM pages WHERE job_id = %s ORDER BY number", (job_id,))
        names = [column.name for column in cursor.description or []]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def submit(api: httpx.Client, path: Any = INVOICE, **data: str) -> httpx.Response:
    with path.open("rb") as handle:
        return api.post("/v1/jobs", files={"file": (path.name, handle)}, data=data)


def test_multipage_invoice_end_to_end(
    api: httpx.Client, worker_process: subprocess.Popen[bytes], s3: ObjectStore
) -> None:
    response = submit(api, metadata=json.dumps({"order": "A-17"}))
    assert response.status_code == 202, response.text
    job = response.json()
    assert response.headers["location"] == f"/v1/jobs/{job['id']}"
    assert job["status"] == "queued"
    assert job["pages"]["total"] == 3

    job = wait_for_job(api, job["id"])
    assert job["status"] == "succeeded", job
    assert job["pages"]["done"] == job["pages"]["succeeded"] == 3
    assert job["metadata"] == {"order": "A-17"}

    document = s3.get_bytes(JobKeys(job["id"]).document).decode()
    assert EXPECTED["invoice_number"] in document
    assert f"{EXPECTED['amount']:.2f}" in document  # 279.84
    assert document.index("<!-- page 1 -->") < document.index("<!-- page 2 -->")
    assert document.index("<!-- page 2 -->") < document.index("<!-- page 3 -->")
    assert api.get(f"/v1/jobs/{job['id']}/markdown").text == document
    page_two = api.get(f"/v1/jobs/{job['id']}/pages/2/markdown")
    assert page_two.status_code == 200 and EXPECTED["invoice_number"] in page_two.text

    manifest = json.loads(s3.get_bytes(JobKeys(job["id"]).manifest))
    assert [page["number"] for page in manifest["pages"]] == [1, 2, 3]
    for row in page_rows(job["id"]):
        assert row["status"] == "succeeded"
        assert row["attempts"] == 1
        assert row["engine"] == "textlayer"
        assert row["engine_reason"].startswith("trustworthy text layer")
        assert row["started_at"] <= row["finished_at"]
        assert row["wall_seconds"] > 0
        assert row["device_seconds"] > 0
        assert row["cost_usd"] > 0
        assert row["output_chars"] > 100
        assert row["error"] is None
        assert row["result_attempt"] == 1
        assert s3.exists(JobKeys(job["id"]).page_markdown(row["number"], 1))
        # Read from the text layer: prepare stored the page alone as a PDF and no image.
        assert s3.exists(JobKeys(job["id"]).page_pdf(row["number"]))
        assert not s3.exists(JobKeys(job["id"]).page_image(row["number"]))
        assert row["image_width_px"] is None and row["image_height_px"] is None
    assert [page["image"] for page in job["page_details"]] == [None, None, None]


def test_scanned_image_goes_through_ocr(
    api: httpx.Client, worker_process: subprocess.Popen[bytes]
) -> None:
    job = wait_for_job(api, submit(api, SAMPLES / "scanned-invoice.png").json()["id"])
    assert job["status"] == "succeeded", job
    [page] = job["page_details"]
    assert page["engine"] == "rapidocr"
    assert "image" in page["engine_reason"]
    markdown = api.get(f"/v1/jobs/{job['id']}/markdown").text
    assert EXPECTED["invoice_number"] in markdown.replace(" ", "")
    assert "279.84" in markdown


def test_page_selection_processes_only_those_pages(
    api: httpx.Client, worker_process: subprocess.Popen[bytes]
) -> None:
    job = wait_for_job(api, submit(api, pages="2-3").json()["id"])
    assert job["status"] == "succeeded"
    assert [row["number"] for row in page_rows(job["id"])] == [2, 3]
    document = api.get(f"/v1/jobs/{job['id']}/markdown").text
    assert "<!-- page 1 -->" not in document
    assert "<!-- page 2 -->" in document and "<!-- page 3 -->" in document
    missing = api.get(f"/v1/jobs/{job['id']}/pages/1/markdown")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "page_not_found"


def test_cancel_stops_pages_not_yet_run(
    api: httpx.Client, worker_process: subprocess.Popen[bytes], tmp_path: Any
) -> None:
    scanned = tmp_path / "twelve-scanned-pages.pdf"
    _image_only_pdf(SAMPLES / "scanned-invoice.png", scanned, pages=12)
    job = submit(api, scanned, engine="rapidocr").json()
    cancelled = api.delete(f"/v1/jobs/{job['id']}")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"

    final = wait_for_job(api, job["id"])
    assert final["status"] == "cancelled"
    # Pages already running may finish; the rest never run.
    assert final["pages"]["succeeded"] < 12
    assert (
        final["pages"]["cancelled"] >= 12 - final["pages"]["succeeded"] - final["pages"]["running"]
    )
    again = api.delete(f"/v1/jobs/{job['id']}")
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "job_finished"


def _image_only_pdf(image: Any, target: Any, pages: int) -> None:
    import pymupdf

    document = pymupdf.open()
    for _ in range(pages):
        page = document.new_page(width=595, height=842)
        page.insert_image(page.rect, filename=str(image))
    document.save(target)
