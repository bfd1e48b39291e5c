"""Documents by URL (source_url): fetched by the real worker over real HTTPS or from the
real S3, through the SSRF guard, under the size cap and the time limit."""

from __future__ import annotations

import hashlib
import io
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest
from minio import Minio

from pagemill.storage import ObjectStore
from tests.conftest import (
    S3_ACCESS_KEY,
    S3_SECRET_KEY,
    SAMPLES,
    TEST_ENV,
    TMP_ROOT,
    wait_for_job,
)
from tests.support import https_sources
from tests.support.https_sources import SourceServer

INVOICE = (SAMPLES / "invoice-multipage.pdf").read_bytes()
SOURCES_BUCKET = TEST_ENV["PAGEMILL_SOURCE_READABLE_BUCKETS"]
CA_BUNDLE = TEST_ENV["PAGEMILL_SOURCE_FETCH_CA_BUNDLE"]
MAX_UPLOAD_BYTES = 100 * 1024 * 1024  # the default cap, which the test worker keeps


@pytest.fixture(scope="module")
def source_server() -> Iterator[SourceServer]:
    cert, key = https_sources.make_certificate(TMP_ROOT)
    # The worker reads the bundle at each fetch: the file only has to exist by then.
    (TMP_ROOT / "source-ca.pem").write_bytes(cert.read_bytes())
    server, stop = https_sources.serve(cert, key, {})
    server.routes.update(
        {
            "/invoice.pdf": https_sources.document(INVOICE),
            "/notes.txt": https_sources.document(b"just some text\n" * 200, "text/plain"),
            "/private.pdf": https_sources.document(INVOICE),
            # localhost is loopback and, unlike 127.0.0.1, not allowlisted.
            "/to-private": https_sources.redirect(server.url("/private.pdf", host="localhost")),
            "/to-invoice": https_sources.redirect("/invoice.pdf"),
            "/two-gigabytes.pdf": https_sources.endless_pdf(2 * 1024**3),
            "/slow.pdf": https_sources.trickle(0.5),
        }
    )
    yield server
    stop()


def submit_url(api: httpx.Client, url: str, **data: str) -> dict[str, Any]:
    response = api.post("/v1/jobs", data={"source_url": url, **data})
    assert response.status_code == 202, response.text
    job: dict[str, Any] = response.json()
    assert job["source"]["url"] == url and job["source"]["sha256"] is None
    return job


def stored_keys(s3: ObjectStore, job_id: str) -> list[str]:
    listed = s3._client.list_objects(s3.bucket, f"jobs/{job_id}/", recursive=True)
    return [item.object_name for item in listed]


def test_an_https_source_is_fetched_and_converted(
    api: httpx.Client,
    worker_process: subprocess.Popen[bytes],
    source_server: SourceServer,
    s3: ObjectStore,
) -> None:
    job = submit_url(api, source_server.url("/to-invoice"), pages="1-2")
    job = wait_for_job(api, job["id"])
    assert job["status"] == "succeeded", job
    assert job["source"]["sha256"] == hashlib.sha256(INVOICE).hexdigest()
    assert job["source"]["bytes"] == len(INVOICE)
    assert (job["source"]["kind"], job["source"]["document_pages"]) == ("pdf", 3)
    assert job["pages"]["total"] == job["pages"]["succeeded"] == 2
    assert s3.get_bytes(f"jobs/{job['id']}/source") == INVOICE
    assert "279.84" in api.get(f"/v1/jobs/{job['id']}/markdown").text


@pytest.mark.parametrize(
    ("path", "code", "says"),
    [
        ("/to-private", "source_unreachable", "loopback address, not allowlisted"),
        ("/notes.txt", "unsupported_type", "not a PDF"),
        ("/two-gigabytes.pdf", "source_too_large", "100.0 MiB limit"),
        ("/slow.pdf", "source_unreachable", "within the 3 s limit"),
        ("/missing.pdf", "source_unreachable", "answered HTTP 404"),
    ],
)
def test_a_failed_fetch_fails_the_job_and_stores_nothing(
    api: httpx.Client,
    worker_process: subprocess.Popen[bytes],
    source_server: SourceServer,
    s3: ObjectStore,
    path: str,
    code: str,
    says: str,
) -> None:
    job = wait_for_job(api, submit_url(api, source_server.url(path))["id"])
    assert job["status"] == "failed", job
    assert job["error"]["code"] == code, job["error"]
    assert says in job["error"]["message"]
    assert job["source"]["sha256"] is None and job["pages"]["total"] == 0
    assert stored_keys(s3, job["id"]) == []
    # The redirect was refused, not followed: the private address saw no request.
    assert "/private.pdf" not in source_server.requested
    if path == "/two-gigabytes.pdf":
        # The worker stopped reading at the cap: the server got to send little more
        # than the cap (what sockets and TLS buffer), nowhere near its 2 GiB.
        assert source_server.sent_bytes[path] < MAX_UPLOAD_BYTES + 64 * 1024 * 1024


@pytest.fixture()
def sources_bucket() -> Iterator[Minio]:
    """The caller's bucket, which the deployment may read; removed afterwards, so the
    shared S3 server does not keep a bucket for every test run."""
    client = Minio(TEST_ENV["PAGEMILL_S3_ENDPOINT"], S3_ACCESS_KEY, S3_SECRET_KEY, secure=False)
    if not client.bucket_exists(SOURCES_BUCKET):
        client.make_bucket(SOURCES_BUCKET)
    yield client
    for item in client.list_objects(SOURCES_BUCKET, recursive=True):
        client.remove_object(SOURCES_BUCKET, item.object_name or "")
    client.remove_bucket(SOURCES_BUCKET)


def test_an_s3_source_is_read_from_a_readable_bucket(
    api: httpx.Client, worker_process: subprocess.Popen[bytes], sources_bucket: Minio
) -> None:
    key = f"inbox/{uuid.uuid4()}.pdf"
    sources_bucket.put_object(SOURCES_BUCKET, key, io.BytesIO(INVOICE), len(INVOICE))
    job = wait_for_job(api, submit_url(api, f"s3://{SOURCES_BUCKET}/{key}", pages="3")["id"])
    assert job["status"] == "succeeded", job
    assert job["source"]["sha256"] == hashlib.sha256(INVOICE).hexdigest()
    missing = wait_for_job(api, submit_url(api, f"s3://{SOURCES_BUCKET}/inbox/none.pdf")["id"])
    assert missing["error"]["code"] == "source_unreachable", missing
    assert "NoSuchKey" in missing["error"]["message"]


@pytest.mark.parametrize(
    ("data", "with_file", "code"),
    [
        ({"source_url": "http://127.0.0.1/a.pdf"}, False, "source_url_scheme_not_allowed"),
        ({"source_url": "file:///etc/passwd"}, False, "source_url_scheme_not_allowed"),
        ({"source_url": "s3://someone-elses-bucket/a.pdf"}, False, "source_bucket_not_readable"),
        ({"source_url": f"s3://{SOURCES_BUCKET}/"}, False, "invalid_source_url"),
        ({"source_url": "https://exa mple.com/a.pdf"}, False, "invalid_source_url"),
        # Once a 500: Postgres cannot store a NUL, and urlsplit raises on an open bracket.
        ({"source_url": f"s3://{SOURCES_BUCKET}/a\x00.pdf"}, False, "invalid_source_url"),
        ({"source_url": f"s3://{SOURCES_BUCKET}/a\r\nb.pdf"}, False, "invalid_source_url"),
        ({"source_url": "s3://[sources/a.pdf"}, False, "invalid_source_url"),
        # Once accepted, then refused by the S3 client at every fetch.
        ({"source_url": f"s3://{SOURCES_BUCKET}/../other/a.pdf"}, False, "invalid_source_url"),
        ({"source_url": "https://127.0.0.1/a.pdf"}, True, "file_and_source_url"),
        ({}, False, "no_document"),
        (
            {"source_url": "https://127.0.0.1/a.pdf", "max_cost_usd": "1"},
            False,
            "max_cost_needs_upload",
        ),
    ],
)
def test_a_source_url_that_cannot_be_used_is_refused_at_submit(
    api: httpx.Client, data: dict[str, str], with_file: bool, code: str
) -> None:
    files = {"file": ("a.pdf", INVOICE)} if with_file else None
    response = api.post("/v1/jobs", data=data, files=files)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == code
    assert api.get("/v1/jobs").json()["jobs"] == []


def test_the_deployments_own_bucket_is_never_readable_as_a_source() -> None:
    from pydantic import ValidationError

    from pagemill.settings import Settings

    own = TEST_ENV["PAGEMILL_S3_BUCKET"]
    with pytest.raises(ValidationError, match="must not name PAGEMILL_S3_BUCKET"):
        Settings(source_readable_buckets=f"{SOURCES_BUCKET},{own}")


def test_a_source_past_the_page_quota_fails_the_job_and_stores_nothing(
    api: httpx.Client,
    db: str,
    worker_process: subprocess.Popen[bytes],
    source_server: SourceServer,
    s3: ObjectStore,
) -> None:
    """A job by URL has no pages to count at submit; its fetched pages count against the
    quota before any is read, as an upload's do at submit."""
    with psycopg.connect(db.replace("+psycopg", "")) as conn:
        conn.execute("UPDATE clients SET page_quota_day = 2")
    job = wait_for_job(api, submit_url(api, source_server.url("/invoice.pdf"))["id"])
    assert job["status"] == "failed", job
    assert job["error"]["code"] == "quota_exceeded", job["error"]
    assert "resets at" in job["error"]["message"]
    assert stored_keys(s3, job["id"]) == []
    assert api.get("/v1/usage").json()["day"]["used"] == 0

    # Two of its three pages fit.
    job = wait_for_job(api, submit_url(api, source_server.url("/invoice.pdf"), pages="1-2")["id"])
    assert job["status"] == "succeeded", job
    assert api.get("/v1/usage").json()["day"]["used"] == 2
