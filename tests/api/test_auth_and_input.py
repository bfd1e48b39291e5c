"""Authentication, isolation between clients, and bad input that must create nothing."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import httpx
import psycopg
import pymupdf
import pytest

from pagemill.storage import ObjectStore
from tests.conftest import SAMPLES, TEST_ENV, make_client_key, wait_for_job


def count_rows(table: str) -> int:
    url = TEST_ENV["PAGEMILL_DATABASE_URL"].replace("+psycopg", "")
    with psycopg.connect(url) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()  # noqa: S608
        assert row is not None
        return int(row[0])


def stored_objects(s3: ObjectStore) -> list[str]:
    """What submissions stored: each job's source, which the API stores for every upload
    it takes before anything else. The objects workers write are left out: the session's
    worker may still be finishing an earlier test's job while a test counts what its own
    refused uploads left."""
    return [
        key
        for item in s3._client.list_objects(s3.bucket, prefix="jobs/", recursive=True)
        if (key := item.object_name or "").endswith("/source")
    ]


def test_no_key_and_bad_key_are_401(api_url: str, db: str) -> None:
    missing = httpx.get(f"{api_url}/v1/jobs")
    assert missing.status_code == 401
    assert missing.json()["error"]["code"] == "missing_api_key"
    wrong = httpx.get(f"{api_url}/v1/jobs", headers={"Authorization": "Bearer pm_abc_nope"})
    assert wrong.status_code == 401
    assert wrong.json()["error"]["code"] == "invalid_api_key"
    garbage = httpx.get(f"{api_url}/v1/jobs", headers={"Authorization": "Bearer nonsense"})
    assert garbage.status_code == 401


def test_another_clients_job_is_404(
    api: httpx.Client, api_url: str, worker_process: subprocess.Popen[bytes]
) -> None:
    with (SAMPLES / "scanned-sentence.pdf").open("rb") as handle:
        job = api.post("/v1/jobs", files={"file": ("a.pdf", handle)}).json()
    wait_for_job(api, job["id"])
    other = {"Authorization": f"Bearer {make_client_key()}"}
    for method, path in [
        ("GET", f"/v1/jobs/{job['id']}"),
        ("GET", f"/v1/jobs/{job['id']}/markdown"),
        ("GET", f"/v1/jobs/{job['id']}/pages/1/markdown"),
        ("DELETE", f"/v1/jobs/{job['id']}"),
    ]:
        response = httpx.request(method, f"{api_url}{path}", headers=other)
        assert response.status_code == 404, (method, path)
        assert response.json()["error"]["code"] == "job_not_found"
    listed = httpx.get(f"{api_url}/v1/jobs", headers=other).json()
    assert listed["jobs"] == []
    assert [listed_job["id"] for listed_job in api.get("/v1/jobs").json()["jobs"]] == [job["id"]]
    succeeded = api.get("/v1/jobs", params={"status": "succeeded"}).json()["jobs"]
    assert [listed_job["id"] for listed_job in succeeded] == [job["id"]]
    assert api.get("/v1/jobs", params={"status": "queued"}).json()["jobs"] == []


def _encrypted_pdf() -> bytes:
    document = pymupdf.open()
    document.new_page().insert_text((72, 72), "confidential")
    return document.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="u", owner_pw="o")


def _zip_named_pdf() -> bytes:
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("invoice.txt", "not a document")
    return buffer.getvalue()


BAD_UPLOADS = [
    (
        "text named .pdf",
        "invoice.pdf",
        b"Dear customer, this is plain text.",
        {},
        415,
        "unsupported_type",
    ),
    ("zip named .png", "scan.png", _zip_named_pdf(), {}, 415, "unsupported_type"),
    (
        "corrupt pdf",
        "broken.pdf",
        b"%PDF-1.7\n1 0 obj <</Type /Catalog>>\ngarbage" * 20,
        {},
        422,
        "unreadable_document",
    ),
    ("encrypted pdf", "secret.pdf", _encrypted_pdf(), {}, 422, "encrypted_document"),
    ("empty file", "empty.pdf", b"", {}, 422, "empty_file"),
    (
        "range outside",
        "invoice.pdf",
        (SAMPLES / "invoice-multipage.pdf").read_bytes(),
        {"pages": "2-9"},
        422,
        "invalid_page_range",
    ),
    (
        "malformed range",
        "invoice.pdf",
        (SAMPLES / "invoice-multipage.pdf").read_bytes(),
        {"pages": "two"},
        422,
        "invalid_page_range",
    ),
    (
        "metadata not an object",
        "invoice.pdf",
        (SAMPLES / "invoice-multipage.pdf").read_bytes(),
        {"metadata": "[1, 2]"},
        422,
        "invalid_metadata",
    ),
    (
        "unknown engine",
        "invoice.pdf",
        (SAMPLES / "invoice-multipage.pdf").read_bytes(),
        {"engine": "magic"},
        422,
        "invalid_engine",
    ),
    (
        "unknown furniture mode",
        "invoice.pdf",
        (SAMPLES / "invoice-multipage.pdf").read_bytes(),
        {"furniture": "hide"},
        422,
        "invalid_furniture",
    ),
    (
        "bad licence use",
        "invoice.pdf",
        (SAMPLES / "invoice-multipage.pdf").read_bytes(),
        {"license_use": "free"},
        422,
        "invalid_request",
    ),
    (
        "webhook not http",
        "invoice.pdf",
        (SAMPLES / "invoice-multipage.pdf").read_bytes(),
        {"webhook_url": "ftp://x"},
        422,
        "invalid_webhook_url",
    ),
]


@pytest.mark.parametrize(
    ("name", "filename", "body", "form", "status", "code"),
    BAD_UPLOADS,
    ids=[case[0] for case in BAD_UPLOADS],
)
def test_bad_input_is_a_clear_4xx_and_creates_nothing(
    api: httpx.Client,
    s3: ObjectStore,
    name: str,
    filename: str,
    body: bytes,
    form: dict[str, str],
    status: int,
    code: str,
) -> None:
    before = stored_objects(s3)
    response = api.post("/v1/jobs", files={"file": (filename, body)}, data=form)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert len(error["message"]) > 10 and error["message"][0].isupper()
    assert count_rows("jobs") == 0
    assert count_rows("pages") == 0
    assert stored_objects(s3) == before


def test_an_address_with_a_trailing_slash_is_a_clear_404_not_a_redirect(
    api: httpx.Client, s3: ObjectStore
) -> None:
    from api.errors import TRAILING_SLASH_MESSAGE

    before = stored_objects(s3)
    with (SAMPLES / "invoice-multipage.pdf").open("rb") as handle:
        response = api.post("/v1/jobs/", files={"file": ("invoice.pdf", handle)})
    # Not a redirect a client might follow to plain http, or without its upload.
    assert response.status_code == 404, response.text
    assert "location" not in response.headers
    assert response.json()["error"] == {"code": "not_found", "message": TRAILING_SLASH_MESSAGE}
    assert count_rows("jobs") == 0
    assert stored_objects(s3) == before
    for path in ("/v1/jobs/00000000-0000-0000-0000-000000000000/", "/v1/usage/"):
        assert api.get(path).json()["error"]["message"] == TRAILING_SLASH_MESSAGE, path
    # An address that is not one with the slash taken off either gets the plain answer.
    nowhere = api.get("/v1/nowhere/").json()["error"]
    assert nowhere == {"code": "not_found", "message": "There is nothing at this address."}
    # The console, which people type, still takes them in.
    console = api.get("/console/", follow_redirects=False)
    assert console.status_code == 303 and console.headers["location"] == "/console/jobs"


def test_missing_file_is_refused(api: httpx.Client) -> None:
    # Neither a file nor a source_url (tests/api/test_source_url.py).
    response = api.post("/v1/jobs", data={"pages": "1"})
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "no_document"


def test_unknown_job_and_openapi(api: httpx.Client, api_url: str) -> None:
    response = api.get("/v1/jobs/00000000-0000-0000-0000-000000000000")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "job_not_found"
    assert api.get("/v1/jobs/not-a-uuid").json()["error"]["code"] == "invalid_request"
    spec = httpx.get(f"{api_url}/openapi.json").json()
    assert "/v1/jobs/{job_id}/markdown" in spec["paths"]
    assert httpx.get(f"{api_url}/docs").status_code == 200


def test_markdown_before_the_job_ends_is_409(
    api: httpx.Client, tmp_path: Path, redis_client: object
) -> None:
    # No worker is needed: the job has just been accepted.
    with (SAMPLES / "scanned-invoice.png").open("rb") as handle:
        job = api.post("/v1/jobs", files={"file": ("scan.png", handle)}).json()
    response = api.get(f"/v1/jobs/{job['id']}/markdown")
    assert response.status_code in (409, 200)
    if response.status_code == 409:
        assert response.json()["error"]["code"] == "not_ready"
