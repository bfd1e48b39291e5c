"""A webhook_url or source_url written with an internal IP address (cloud metadata,
loopback, private, link-local) is refused at submit, as every delivery or fetch would
refuse it, and nothing is created. Host names are not looked up at submit: where a name
leads is decided at delivery and fetch time, on what it resolves to then.

The API here allowlists, for webhooks, the metadata address as a host (which must not
help: metadata is never allowed) and the network 10.20.0.0/16; for sources, nothing.
No worker reads its queues, so the jobs it accepts stay queued.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from pagemill.storage import ObjectStore
from tests.api.test_auth_and_input import count_rows, stored_objects
from tests.conftest import SAMPLES, TEST_ENV, TMP_ROOT
from tests.support import services

SCAN = SAMPLES / "scanned-sentence.pdf"

# A URL's host (and port) as written, the address the refusal names, and its reason.
INTERNAL_HOSTS = [
    ("169.254.169.254", "169.254.169.254", "a cloud metadata address"),
    ("[fd00:ec2::254]", "fd00:ec2::254", "a cloud metadata address"),
    ("100.100.100.200", "100.100.100.200", "a cloud metadata address"),
    ("127.0.0.1:6379", "127.0.0.1", "a loopback address"),
    ("[::1]:8080", "::1", "a loopback address"),
    ("10.0.0.1", "10.0.0.1", "a private address"),
    ("192.168.1.20", "192.168.1.20", "a private address"),
    ("[fd00::1]", "fd00::1", "a private address"),
    ("[fe80::1]", "fe80::1", "a link-local address"),
    ("169.254.10.1", "169.254.10.1", "a link-local address"),
    # Reaches this host's own services on Linux: a URL's host here, not a bind address.
    ("0.0.0.0", "0.0.0.0", "an unspecified address"),  # noqa: S104
    ("100.64.0.1", "100.64.0.1", "not a public address"),
    (
        "[::ffff:169.254.169.254]",
        "::ffff:169.254.169.254",
        "a cloud metadata address (169.254.169.254 in IPv4-mapped form)",
    ),
    ("[64:ff9b::a00:1]", "64:ff9b::a00:1", "a private address (10.0.0.1 in NAT64 form)"),
]
IDS = [host for host, _, _ in INTERNAL_HOSTS]


@pytest.fixture(scope="module")
def strict_api_url(database_url: str, s3: Any, redis_client: Any) -> Iterator[str]:
    port = services.free_port()
    env = {
        **os.environ,
        "PAGEMILL_API_BASE_URL": f"http://127.0.0.1:{port}",
        "PAGEMILL_QUEUE_PREFIX": f"{TEST_ENV['PAGEMILL_QUEUE_PREFIX']}strict{port}-",
        "PAGEMILL_WEBHOOK_ALLOWED_HOSTS": "169.254.169.254",
        "PAGEMILL_WEBHOOK_ALLOWED_CIDRS": "10.20.0.0/16",
        "PAGEMILL_SOURCE_FETCH_ALLOWED_HOSTS": "",
    }
    process = services.start_api(env, TMP_ROOT / f"strict-api-{port}.log", port)
    yield f"http://127.0.0.1:{port}"
    services.stop(process)


@pytest.fixture()
def strict_api(strict_api_url: str, api_key: str) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {api_key}"}
    with httpx.Client(base_url=strict_api_url, headers=headers, timeout=60) as client:
        yield client


def _upload(client: httpx.Client, key: str | None = None, **form: str) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key else {}
    with SCAN.open("rb") as handle:
        return client.post(
            "/v1/jobs", files={"file": ("s.pdf", handle)}, data=form, headers=headers
        )


def _assert_refused(
    response: httpx.Response, code: str, field: str, address: str, reason: str
) -> None:
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == code
    message = error["message"]
    assert message.startswith(f"The {field} ") and message.endswith("."), message
    assert f" {address}, {reason}" in message, message


@pytest.mark.parametrize(("host", "address", "reason"), INTERNAL_HOSTS, ids=IDS)
def test_a_webhook_url_at_an_internal_address_is_refused_at_submit(
    strict_api: httpx.Client, s3: ObjectStore, host: str, address: str, reason: str
) -> None:
    before = stored_objects(s3)
    key = f"internal webhook {host}"
    response = _upload(strict_api, key, webhook_url=f"http://{host}/latest/meta-data")
    _assert_refused(response, "invalid_webhook_url", "webhook_url", address, reason)
    assert count_rows("jobs") == 0
    assert count_rows("idempotency_keys") == 0
    assert stored_objects(s3) == before
    # The key is free: the corrected request is accepted under it.
    assert _upload(strict_api, key).status_code == 202


@pytest.mark.parametrize(("host", "address", "reason"), INTERNAL_HOSTS, ids=IDS)
def test_a_source_url_at_an_internal_address_is_refused_at_submit(
    strict_api: httpx.Client, host: str, address: str, reason: str
) -> None:
    response = strict_api.post("/v1/jobs", data={"source_url": f"https://{host}/doc.pdf"})
    _assert_refused(response, "invalid_source_url", "source_url", address, reason)
    assert count_rows("jobs") == 0


def test_metadata_is_refused_even_when_allowlisted_and_allowlists_are_honoured(
    strict_api: httpx.Client,
) -> None:
    metadata = _upload(strict_api, webhook_url="http://169.254.169.254/latest/meta-data")
    assert metadata.status_code == 422, metadata.text
    assert "never" in metadata.json()["error"]["message"]
    # Inside PAGEMILL_WEBHOOK_ALLOWED_CIDRS: accepted, as delivery would send to it.
    allowed = _upload(strict_api, webhook_url="http://10.20.0.5:8080/hook")
    assert allowed.status_code == 202, allowed.text
    outside = _upload(strict_api, webhook_url="http://10.21.0.5:8080/hook")
    assert outside.status_code == 422, outside.text
    assert count_rows("jobs") == 1


def test_the_session_allowlist_still_admits_its_loopback_receivers(api: httpx.Client) -> None:
    """The tests' settings allowlist 127.0.0.1 for webhooks and sources (tests/conftest.py)."""
    port = services.free_port()  # nothing listens: should a worker deliver, it fails
    webhook = _upload(api, webhook_url=f"http://127.0.0.1:{port}/hook")
    assert webhook.status_code == 202, webhook.text
    # A loopback address the allowlist does not name is still refused.
    other = _upload(api, webhook_url=f"http://127.0.0.2:{port}/hook")
    assert other.status_code == 422, other.text
    assert other.json()["error"]["code"] == "invalid_webhook_url"


def test_host_names_are_left_to_delivery_and_fetch_time(strict_api: httpx.Client) -> None:
    # .invalid never resolves (RFC 6761): a lookup at submit would fail.
    webhook = _upload(strict_api, webhook_url="https://hooks.invalid/in")
    assert webhook.status_code == 202, webhook.text
    source = strict_api.post("/v1/jobs", data={"source_url": "https://files.invalid/doc.pdf"})
    assert source.status_code == 202, source.text
    public = _upload(strict_api, webhook_url="https://93.184.215.14/hook")
    assert public.status_code == 202, public.text


def test_a_batch_refuses_internal_addresses_and_creates_nothing(
    strict_api: httpx.Client, s3: ObjectStore
) -> None:
    before = stored_objects(s3)
    webhook = strict_api.post(
        "/v1/batches",
        files=[("file", ("s.pdf", SCAN.read_bytes(), "application/pdf"))],
        data={"webhook_url": "http://[fd00::1]/hook"},
    )
    _assert_refused(webhook, "invalid_webhook_url", "webhook_url", "fd00::1", "a private address")

    sources = strict_api.post(
        "/v1/batches",
        data={"source_url": ["https://files.invalid/a.pdf", "https://169.254.169.254/b.pdf"]},
    )
    assert sources.status_code == 422, sources.text
    error = sources.json()["error"]
    assert error["code"] == "batch_rejected"
    [item] = error["items"]
    assert (item["index"], item["code"]) == (1, "invalid_source_url")
    assert "a cloud metadata address" in item["message"]
    assert count_rows("jobs") == 0
    assert count_rows("batches") == 0
    assert stored_objects(s3) == before
