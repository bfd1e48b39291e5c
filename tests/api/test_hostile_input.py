"""Input that JSON, HTTP or Python allow but the service cannot keep: each is a clear
4xx that stores nothing and leaves the Idempotency-Key free, and a job stored before
today's limits cannot break its client's job list."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from pagemill.storage import ObjectStore
from tests.api.test_auth_and_input import count_rows, stored_objects
from tests.conftest import SAMPLES, TEST_ENV, TMP_ROOT, make_client_key
from tests.support import services

SCAN = SAMPLES / "scanned-sentence.pdf"
INVOICE = SAMPLES / "invoice-multipage.pdf"  # three pages


def nested(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


# The raw metadata text as a client would send it, and the error code expected.
HOSTILE_FORMS: list[tuple[str, dict[str, str], str]] = [
    ("NaN", {"metadata": '{"a": NaN}'}, "invalid_metadata"),
    ("Infinity", {"metadata": '{"a": Infinity}'}, "invalid_metadata"),
    ("-Infinity", {"metadata": '{"a": [-Infinity]}'}, "invalid_metadata"),
    ("1e999", {"metadata": '{"a": 1e999}'}, "invalid_metadata"),
    ("NUL escape", {"metadata": '{"a": "x\\u0000y"}'}, "invalid_metadata"),
    ("NUL in a key", {"metadata": '{"\\u0000": 1}'}, "invalid_metadata"),
    ("lone surrogate", {"metadata": '{"a": "\\ud800"}'}, "invalid_metadata"),
    ("lone surrogate key", {"metadata": '{"\\udfff": 1}'}, "invalid_metadata"),
    ("nested 300 deep", {"metadata": nested(300)}, "invalid_metadata"),
    (
        "nested 1000 deep",
        {"metadata": '{"a": ' + "[" * 1000 + "]" * 1000 + "}"},
        "invalid_metadata",
    ),
    ("5000-digit integer", {"metadata": '{"a": ' + "9" * 5000 + "}"}, "invalid_metadata"),
    ("5000-digit pages", {"pages": "9" * 5000}, "invalid_page_range"),
    ("5000-digit page range", {"pages": "1-" + "9" * 5000}, "invalid_page_range"),
    ("selection longer than kept", {"pages": ",".join(["1"] * 150)}, "invalid_page_range"),
    ("unclosed IPv6 bracket", {"webhook_url": "http://[::1/"}, "invalid_webhook_url"),
    ("bad port", {"webhook_url": "http://example.com:99999/"}, "invalid_webhook_url"),
    ("NUL in webhook URL", {"webhook_url": "http://example.com/\x00"}, "invalid_webhook_url"),
    # Accepted at submit once, then refused by the HTTP client at every delivery.
    ("octal IPv4 host", {"webhook_url": "http://0251.0376.0251.0376/"}, "invalid_webhook_url"),
    (
        "CR LF in webhook URL",
        {"webhook_url": "http://example.com/a\r\nX: y"},
        "invalid_webhook_url",
    ),
]


@pytest.mark.parametrize(
    ("name", "form", "code"), HOSTILE_FORMS, ids=[case[0] for case in HOSTILE_FORMS]
)
def test_hostile_form_is_422_stores_nothing_and_frees_the_key(
    api: httpx.Client, s3: ObjectStore, name: str, form: dict[str, str], code: str
) -> None:
    before = stored_objects(s3)
    key = {"Idempotency-Key": f"hostile {name}"}
    with SCAN.open("rb") as handle:
        response = api.post("/v1/jobs", files={"file": ("s.pdf", handle)}, data=form, headers=key)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert error["message"][0].isupper() and len(error["message"]) < 400
    assert count_rows("jobs") == 0
    assert stored_objects(s3) == before
    # The key is free: the corrected request is accepted under it.
    with SCAN.open("rb") as handle:
        corrected = api.post("/v1/jobs", files={"file": ("s.pdf", handle)}, headers=key)
    assert corrected.status_code == 202, corrected.text


def test_reasonable_metadata_is_kept_exactly(api: httpx.Client) -> None:
    metadata = {
        "order": "A-17",
        "nested": {"depth": [[[{"ok": True}]]]},
        "big": 9_223_372_036_854_775_807,
        "small": -9_223_372_036_854_775_808,
        "ratio": 0.125,
        "tiny": 2.5e-10,
        "text": "caf\u00e9 \U0001f600 \uffff",
        "none": None,
    }
    with SCAN.open("rb") as handle:
        response = api.post(
            "/v1/jobs", files={"file": ("s.pdf", handle)}, data={"metadata": json.dumps(metadata)}
        )
    assert response.status_code == 202, response.text
    assert response.json()["metadata"] == metadata
    assert api.get(f"/v1/jobs/{response.json()['id']}").json()["metadata"] == metadata

    # jsonb keeps numbers as decimals: a float sent as 1e300 comes back as the integer
    # it equals, larger than 64 bits, and is still shown.
    with SCAN.open("rb") as handle:
        large = api.post(
            "/v1/jobs", files={"file": ("s.pdf", handle)}, data={"metadata": '{"f": 1e300}'}
        ).json()
    assert api.get(f"/v1/jobs/{large['id']}").json()["metadata"] == {"f": 10**300}


def _database() -> str:
    return TEST_ENV["PAGEMILL_DATABASE_URL"].replace("+psycopg", "")


def test_one_unrenderable_job_does_not_break_the_list(api: httpx.Client) -> None:
    # A job stored before the nesting limit existed, with metadata 300 deep.
    ids = []
    for _ in range(2):
        with SCAN.open("rb") as handle:
            ids.append(api.post("/v1/jobs", files={"file": ("s.pdf", handle)}).json()["id"])
    with psycopg.connect(_database()) as conn:
        conn.execute("UPDATE jobs SET metadata = %s::jsonb WHERE id = %s", (nested(300), ids[0]))
    listed = api.get("/v1/jobs")
    assert listed.status_code == 200, listed.text
    assert sorted(job["id"] for job in listed.json()["jobs"]) == sorted(ids)
    one = api.get(f"/v1/jobs/{ids[0]}")
    assert one.status_code == 200, one.text
    assert one.json()["metadata"] == {}
    assert api.get(f"/v1/jobs/{ids[1]}").json()["metadata"] == {}


def _post(api: httpx.Client, key: str, **form: str) -> httpx.Response:
    with INVOICE.open("rb") as handle:
        return api.post(
            "/v1/jobs",
            files={"file": (INVOICE.name, handle)},
            data=form,
            headers={"Idempotency-Key": key},
        )


def test_explicit_defaults_are_the_same_request(api: httpx.Client) -> None:
    first = _post(api, "defaults")
    assert first.status_code == 202, first.text
    for form in (
        {"engine": "auto"},
        {"license_use": "non_commercial"},
        {"furniture": "separate"},
        {"pages": ""},
        {"metadata": "{}"},
        {"webhook_url": " "},
        {"engine": "auto", "license_use": "non_commercial", "furniture": "separate"},
    ):
        again = _post(api, "defaults", **form)
        assert again.status_code == 202, (form, again.text)
        assert again.json()["id"] == first.json()["id"], form
    spelled = _post(api, "spelled", pages="1-2", max_cost_usd="5")
    assert spelled.status_code == 202, spelled.text
    for form in ({"pages": " 1 - 2 "}, {"pages": "2,1"}, {"pages": "1,2", "max_cost_usd": "5.00"}):
        again = _post(api, "spelled", **{"max_cost_usd": "5", **form})
        assert again.json().get("id") == spelled.json()["id"], (form, again.text)
    other = _post(api, "defaults", engine="rapidocr")
    assert other.status_code == 422
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    assert count_rows("jobs") == 2


@pytest.fixture()
def unserved_api(db: str, s3: Any, redis_client: Any) -> Iterator[str]:
    """An API whose queues no worker reads: its jobs stay where submit left them."""
    port = services.free_port()
    env = {
        **os.environ,
        "PAGEMILL_API_BASE_URL": f"http://127.0.0.1:{port}",
        "PAGEMILL_QUEUE_PREFIX": f"{TEST_ENV['PAGEMILL_QUEUE_PREFIX']}unserved{port}-",
    }
    process = services.start_api(env, TMP_ROOT / f"unserved-api-{port}.log", port)
    yield f"http://127.0.0.1:{port}"
    services.stop(process)


def test_page_markdown_before_prepare_is_409_and_outside_the_job_404(unserved_api: str) -> None:
    headers = {"Authorization": f"Bearer {make_client_key()}"}
    with httpx.Client(base_url=unserved_api, headers=headers, timeout=60) as client:
        with INVOICE.open("rb") as handle:
            job = client.post(
                "/v1/jobs", files={"file": ("i.pdf", handle)}, data={"pages": "2-3"}
            ).json()
        assert job["status"] == "queued"
        for number in (2, 3):
            waiting = client.get(f"/v1/jobs/{job['id']}/pages/{number}/markdown")
            assert waiting.status_code == 409, waiting.text
            assert waiting.json()["error"]["code"] == "page_not_ready"
        for number in (1, 4, 1_000_000):
            outside = client.get(f"/v1/jobs/{job['id']}/pages/{number}/markdown")
            assert outside.status_code == 404, (number, outside.text)
            assert outside.json()["error"]["code"] == "page_not_found"


def test_every_numeric_query_parameter_is_bounded(api_url: str, db: str) -> None:
    spec = httpx.get(f"{api_url}/openapi.json").json()
    unbounded = []
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                schema = parameter.get("schema", {})
                variants = schema.get("anyOf", [schema])
                for variant in variants:
                    if variant.get("type") == "integer" and not (
                        "maximum" in variant and variant["maximum"] <= 2**31
                    ):
                        unbounded.append(f"{method.upper()} {path} {parameter['name']}")
    assert unbounded == []


def test_offsets_past_bigint_are_422(api_url: str, db: str) -> None:
    admin = {"Authorization": f"Bearer {make_client_key(admin=True)}"}
    for path in (
        "/v1/jobs",
        "/v1/ops/webhook-deliveries",
        "/v1/ops/jobs-by-client",
        "/v1/ops/stuck-jobs",
    ):
        for params in ({"offset": str(2**63)}, {"offset": str(2**63 - 1)}, {"limit": str(2**63)}):
            response = httpx.get(f"{api_url}{path}", params=params, headers=admin)
            assert response.status_code == 422, (path, params, response.text)
            assert response.json()["error"]["code"] == "invalid_request"


def test_long_or_odd_filenames_are_kept_shortened(api: httpx.Client) -> None:
    for sent, kept in ((b"a" * 600 + b".pdf", "a" * 255), (b"in\x00voice\x1f.pdf", "invoice.pdf")):
        # Written by hand: httpx would percent-encode the control characters.
        body = (
            b'--b\r\nContent-Disposition: form-data; name="file"; filename="'
            + sent
            + b'"\r\nContent-Type: application/pdf\r\n\r\n'
            + SCAN.read_bytes()
            + b"\r\n--b--\r\n"
        )
        response = api.post(
            "/v1/jobs",
            content=body,
            headers={"Content-Type": "multipart/form-data; boundary=b"},
        )
        assert response.status_code == 202, response.text
        assert response.json()["source"]["filename"] == kept


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("multipart/form-data", b"--b\r\n"),  # no boundary
        ("multipart/form-data; boundary=b", b"not a multipart body"),
    ],
    ids=["no boundary", "broken framing"],
)
def test_a_form_that_cannot_be_parsed_is_invalid_request(
    api: httpx.Client, s3: ObjectStore, content_type: str, body: bytes
) -> None:
    """Once 400 `http_error`, a code no other refusal uses."""
    before = stored_objects(s3)
    response = api.post("/v1/jobs", content=body, headers={"Content-Type": content_type})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["message"].startswith("The request body cannot be read: ")
    assert count_rows("jobs") == 0
    assert stored_objects(s3) == before


def test_an_empty_idempotency_key_is_refused(api: httpx.Client) -> None:
    """Once accepted as the key "", which every client that sent the header blank shared."""
    with SCAN.open("rb") as handle:
        response = api.post(
            "/v1/jobs", files={"file": ("s.pdf", handle)}, headers={"Idempotency-Key": ""}
        )
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "invalid_request"
    assert "Idempotency-Key" in response.json()["error"]["message"]
    assert count_rows("jobs") == 0
    assert count_rows("idempotency_keys") == 0
