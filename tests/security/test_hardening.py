"""Input hardening and security: idempotency, streaming size cap, rate limit, private
objects, no secrets in logs or error bodies."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pymupdf
import pytest

from pagemill.clients.repository import authenticate
from pagemill.db.session import session_factory
from pagemill.jobs import idempotency
from pagemill.jobs.service import SubmitOptions, request_fingerprint
from pagemill.settings import get_settings
from pagemill.storage import ObjectStore
from tests.api.test_auth_and_input import count_rows, stored_objects
from tests.conftest import S3_SECRET_KEY, SAMPLES, TMP_ROOT, make_client_key
from tests.support import services

INVOICE = SAMPLES / "invoice-multipage.pdf"


def post_job(
    api: httpx.Client, key: str | None, path: Path = INVOICE, **data: str
) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key else {}
    with path.open("rb") as handle:
        return api.post("/v1/jobs", files={"file": (path.name, handle)}, data=data, headers=headers)


def test_idempotency_key_same_request_same_job(api: httpx.Client) -> None:
    first = post_job(api, "order-17", pages="1-2")
    again = post_job(api, "order-17", pages="1-2")
    assert first.status_code == again.status_code == 202
    assert again.json()["id"] == first.json()["id"]
    assert again.headers["location"] == first.headers["location"]
    assert count_rows("jobs") == 1


def test_an_option_left_at_its_default_does_not_change_the_request(api: httpx.Client) -> None:
    # Keys stored before the furniture option existed must still match their retries.
    first = post_job(api, "order-19", pages="1")
    same = post_job(api, "order-19", pages="1", furniture="separate")
    assert same.status_code == 202 and same.json()["id"] == first.json()["id"]
    other = post_job(api, "order-19", pages="1", furniture="inline")
    assert other.status_code == 422
    assert other.json()["error"]["code"] == "idempotency_key_reused"


def test_idempotency_key_different_request_is_422(api: httpx.Client) -> None:
    assert post_job(api, "order-18", pages="1").status_code == 202
    other = post_job(api, "order-18", pages="2")
    assert other.status_code == 422
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    assert count_rows("jobs") == 1


def test_idempotency_key_is_scoped_per_client(api: httpx.Client, api_url: str) -> None:
    mine = post_job(api, "shared-key")
    with httpx.Client(
        base_url=api_url, headers={"Authorization": f"Bearer {make_client_key()}"}, timeout=60
    ) as other_client:
        theirs = post_job(other_client, "shared-key")
    assert mine.status_code == theirs.status_code == 202
    assert mine.json()["id"] != theirs.json()["id"]


def test_idempotency_key_in_flight_is_409(api: httpx.Client) -> None:
    # The first request with the key has claimed it and is still being processed.
    with session_factory()() as session:
        client = authenticate(session, str(api.headers["Authorization"])[7:])
        assert client is not None
        fingerprint = request_fingerprint(
            hashlib.sha256(INVOICE.read_bytes()).hexdigest(),
            SubmitOptions(),
            INVOICE.name,
            get_settings(),
            client,
        )
        hour = timedelta(hours=1)
        assert idempotency.begin(session, client.id, "in-flight", fingerprint, hour, hour) is None
    duplicate = post_job(api, "in-flight")
    assert duplicate.status_code == 409, duplicate.text
    assert duplicate.json()["error"]["code"] == "idempotency_key_in_flight"
    assert duplicate.headers["retry-after"] == "1"
    assert count_rows("jobs") == 0


def test_rejected_submission_frees_its_key(api: httpx.Client, tmp_path: Path) -> None:
    bogus = tmp_path / "notes.pdf"
    bogus.write_text("not a pdf")
    assert post_job(api, "retry-me", bogus).status_code == 415
    # The same key now carries a corrected request, which succeeds.
    assert post_job(api, "retry-me").status_code == 202


@pytest.fixture(scope="module")
def small_limits_api_process(database_url: str, s3: Any, redis_client: Any) -> Iterator[str]:
    # One process for the module: its tests use fresh client keys, and the rate
    # limiter counts per client.
    port = services.free_port()
    env = {
        **os.environ,
        "PAGEMILL_MAX_UPLOAD_BYTES": str(200 * 1024),
        "PAGEMILL_RATE_LIMIT": "5/minute",
        "PAGEMILL_MAX_PAGES": "2",
        "PAGEMILL_MAX_IMAGE_PIXELS": "1000000",
        "PAGEMILL_QUEUE_PREFIX": f"limits{port}-",
    }
    process = services.start_api(env, TMP_ROOT / f"limits-api-{port}.log", port)
    yield f"http://127.0.0.1:{port}"
    services.stop(process)


@pytest.fixture()
def small_limits_api(db: str, small_limits_api_process: str) -> str:
    return small_limits_api_process


def test_upload_cap_enforced_while_streaming(small_limits_api: str, s3: ObjectStore) -> None:
    key = make_client_key()
    before = stored_objects(s3)
    sent = 0

    def endless() -> Iterator[bytes]:
        nonlocal sent
        yield b'--b\r\nContent-Disposition: form-data; name="file"; filename="x.pdf"\r\n\r\n%PDF-'
        for _ in range(1000):  # 64 MiB offered, without a Content-Length
            sent += 65536
            yield b"\0" * 65536

    with httpx.Client(base_url=small_limits_api, timeout=60) as client:
        try:
            response = client.post(
                "/v1/jobs",
                content=endless(),
                headers={
                    "Authorization": f"Bearer {key}",
                    "Content-Type": "multipart/form-data; boundary=b",
                },
            )
        except httpx.HTTPError:
            response = None  # the server may close the connection as it answers
        if response is not None:
            assert response.status_code == 413
            assert response.json()["error"]["code"] == "file_too_large"
        declared = client.post(
            "/v1/jobs",
            files={"file": ("big.pdf", b"%PDF-" + b"\0" * (300 * 1024))},
            headers={"Authorization": f"Bearer {key}"},
        )
    assert declared.status_code == 413
    assert declared.json()["error"]["code"] == "file_too_large"
    assert sent < 64 * 1024 * 1024, "the server read the whole body before refusing it"
    assert count_rows("jobs") == 0
    assert stored_objects(s3) == before


def test_rate_limit_is_per_client_with_retry_after(small_limits_api: str) -> None:
    busy, quiet = make_client_key(), make_client_key()
    with httpx.Client(base_url=small_limits_api, timeout=30) as client:
        codes = [
            client.get("/v1/jobs", headers={"Authorization": f"Bearer {busy}"}).status_code
            for _ in range(7)
        ]
        limited = client.get("/v1/jobs", headers={"Authorization": f"Bearer {busy}"})
        other = client.get("/v1/jobs", headers={"Authorization": f"Bearer {quiet}"})
    assert codes[:5] == [200] * 5 and codes[5:] == [429, 429]
    assert limited.status_code == 429
    assert limited.json()["error"]["code"] == "rate_limited"
    assert 1 <= int(limited.headers["retry-after"]) <= 61
    assert other.status_code == 200


def test_objects_are_private(api: httpx.Client, worker_process: Any, s3: ObjectStore) -> None:
    from tests.conftest import wait_for_job

    job = wait_for_job(api, post_job(api, None).json()["id"])
    key = f"jobs/{job['id']}/document.md"
    assert s3.exists(key)
    anonymous = httpx.get(f"http://127.0.0.1:8333/{s3.bucket}/{key}")
    assert anonymous.status_code in (401, 403)
    presigned = httpx.get(s3.presigned_get_url(key, timedelta(minutes=5)))
    assert presigned.status_code == 200 and "INV/2023/03/0008" in presigned.text


def test_no_secrets_in_logs_or_error_bodies(api: httpx.Client, api_url: str) -> None:
    key = api.headers["Authorization"][7:]
    wrong = key[:-4] + "abcd"
    response = httpx.get(f"{api_url}/v1/jobs", headers={"Authorization": f"Bearer {wrong}"})
    assert response.status_code == 401
    assert wrong not in response.text and key not in response.text
    post_job(api, None)  # a normal request, logged as usual
    for log in TMP_ROOT.glob("*.log"):
        text = log.read_text(errors="replace")
        assert key not in text, log
        assert wrong not in text, log
        assert S3_SECRET_KEY not in text, log


def test_page_count_page_size_and_pixel_caps(small_limits_api: str, s3: ObjectStore) -> None:
    key = make_client_key()
    huge_page = pymupdf.open()
    huge_page.new_page(width=20_000, height=600)
    cases = [
        ("three-pages.pdf", INVOICE.read_bytes(), "too_many_pages"),
        ("banner.pdf", huge_page.tobytes(), "page_too_large"),
        ("wide.png", _white_png(2000, 1000), "image_too_large"),  # 2 Mpx, a few KB
    ]
    before = stored_objects(s3)
    with httpx.Client(
        base_url=small_limits_api, headers={"Authorization": f"Bearer {key}"}, timeout=60
    ) as client:
        for name, body, code in cases:
            response = client.post("/v1/jobs", files={"file": (name, body)})
            assert response.status_code == 422, (name, response.text)
            assert response.json()["error"]["code"] == code
    assert count_rows("jobs") == 0
    assert stored_objects(s3) == before


def _white_png(width: int, height: int) -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("L", (width, height), 255).save(buffer, format="PNG")
    return buffer.getvalue()
