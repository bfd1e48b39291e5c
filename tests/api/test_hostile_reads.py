"""Requests an outside client may send to the endpoints that read and manage existing
jobs: each is answered with a clear 4xx (a stable code and a sentence), never a 500, a
redirect, another client's data or a silently different request. The jobs are made
from rows and objects, so no worker is needed."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import psycopg
import pytest

from pagemill.clients.repository import authenticate
from pagemill.db.session import session_scope
from pagemill.jobs import purge
from pagemill.storage import JobKeys, ObjectStore
from tests.conftest import API_APPLICATION_NAME, DB_NAME, TEST_ENV, make_client_key
from tests.support.factories import add_job

PAGE_MARKDOWN = b"Page one.\n"
PAGE_BLOCKS = b'{"schema_version": 1, "page": 1, "blocks": []}'
DOCUMENT = b"<!-- page 1 -->\n\nPage one.\n"
INVOICE = b'{"schema_version": 1, "invoices": []}'
ZERO = "00000000-0000-0000-0000-000000000000"


def _database() -> str:
    return TEST_ENV["PAGEMILL_DATABASE_URL"].replace("+psycopg", "")


def add_stored_job(s3: ObjectStore, key: str) -> str:
    """A succeeded one-page job of the key's client, submitted with extract=invoice, with
    its page's Markdown and blocks, its document and its invoice data stored."""
    with session_scope() as session:
        client = authenticate(session, key)
        assert client is not None
        job = add_job(session, client.id, [{"engine": "rapidocr"}])
        job.extract = "invoice"
        job_id = job.id
    keys = JobKeys(job_id)
    # The factory's page predates results kept by attempt: its objects have no attempt.
    s3.put_bytes(keys.page_markdown(1, None), PAGE_MARKDOWN, "text/markdown")
    s3.put_bytes(keys.page_blocks(1, None), PAGE_BLOCKS, "application/json")
    s3.put_bytes(keys.document, DOCUMENT, "text/markdown")
    s3.put_bytes(keys.invoice, INVOICE, "application/json")
    return str(job_id)


@pytest.fixture()
def job_id(api: httpx.Client, s3: ObjectStore) -> str:
    return add_stored_job(s3, str(api.headers["Authorization"])[7:])


def assert_clear_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code, error
    assert error["message"][0].isupper() and error["message"].endswith("."), error
    assert len(error["message"]) < 400


# --- Already refused clearly: kept so that they stay so.

# (name, method, path with {job}, who calls, status, code). Who: own, other (another
# client's key), admin, none (no key), or the Authorization header itself.
REFUSALS: list[tuple[str, str, str, str, int, str]] = [
    ("job id not a uuid", "GET", "/v1/jobs/not-a-uuid", "own", 422, "invalid_request"),
    ("job id 0", "GET", "/v1/jobs/0/markdown", "own", 422, "invalid_request"),
    ("job id NUL", "GET", "/v1/jobs/%00", "own", 422, "invalid_request"),
    ("job id 5000 chars", "GET", "/v1/jobs/" + "a" * 5000, "own", 422, "invalid_request"),
    ("unknown job", "GET", f"/v1/jobs/{ZERO}", "own", 404, "job_not_found"),
    ("page 0", "GET", "/v1/jobs/{job}/pages/0/markdown", "own", 422, "invalid_request"),
    ("page -1", "GET", "/v1/jobs/{job}/pages/-1/blocks", "own", 422, "invalid_request"),
    (
        "page 10**30",
        "GET",
        f"/v1/jobs/{{job}}/pages/{10**30}/blocks",
        "own",
        422,
        "invalid_request",
    ),
    ("page 1e3", "GET", "/v1/jobs/{job}/pages/1e3/markdown", "own", 422, "invalid_request"),
    ("page NaN", "GET", "/v1/jobs/{job}/pages/NaN/blocks", "own", 422, "invalid_request"),
    # Integers as Python writes them are not page numbers: 1.0 was page 1, 1_0 page 10.
    ("page 1.0", "GET", "/v1/jobs/{job}/pages/1.0/markdown", "own", 422, "invalid_request"),
    ("page 1_0", "GET", "/v1/jobs/{job}/pages/1_0/blocks", "own", 422, "invalid_request"),
    ("page +1", "GET", "/v1/jobs/{job}/pages/+1/markdown", "own", 422, "invalid_request"),
    ("page spaced", "GET", "/v1/jobs/{job}/pages/%201/markdown", "own", 422, "invalid_request"),
    (
        "page Arabic-Indic 1",
        "GET",
        "/v1/jobs/{job}/pages/\u0661/blocks",
        "own",
        422,
        "invalid_request",
    ),
    (
        "page superscript 2",
        "GET",
        "/v1/jobs/{job}/pages/\u00b2/markdown",
        "own",
        422,
        "invalid_request",
    ),
    (
        "page 5000 digits",
        "GET",
        "/v1/jobs/{job}/pages/" + "9" * 5000 + "/blocks",
        "own",
        422,
        "invalid_request",
    ),
    ("page outside the job", "GET", "/v1/jobs/{job}/pages/2/blocks", "own", 404, "page_not_found"),
    (
        "page at the cap",
        "GET",
        "/v1/jobs/{job}/pages/1000000/markdown",
        "own",
        404,
        "page_not_found",
    ),
    (
        "page past the cap",
        "GET",
        "/v1/jobs/{job}/pages/1000001/markdown",
        "own",
        422,
        "invalid_request",
    ),
    ("other's job", "GET", "/v1/jobs/{job}", "other", 404, "job_not_found"),
    ("other's document", "GET", "/v1/jobs/{job}/markdown", "other", 404, "job_not_found"),
    ("other's page", "GET", "/v1/jobs/{job}/pages/1/markdown", "other", 404, "job_not_found"),
    ("other's blocks", "GET", "/v1/jobs/{job}/pages/1/blocks", "other", 404, "job_not_found"),
    ("other's invoice", "GET", "/v1/jobs/{job}/invoice", "other", 404, "job_not_found"),
    (
        "other's deliveries",
        "GET",
        "/v1/jobs/{job}/webhook-deliveries",
        "other",
        404,
        "job_not_found",
    ),
    ("other's cancel", "DELETE", "/v1/jobs/{job}", "other", 404, "job_not_found"),
    ("other's purge", "DELETE", "/v1/jobs/{job}?purge=true", "other", 404, "job_not_found"),
    ("cancel an ended job", "DELETE", "/v1/jobs/{job}", "own", 409, "job_finished"),
    ("purge not a boolean", "DELETE", "/v1/jobs/{job}?purge=maybe", "own", 422, "invalid_request"),
    ("purge empty", "DELETE", "/v1/jobs/{job}?purge=", "own", 422, "invalid_request"),
    ("limit text", "GET", "/v1/jobs?limit=abc", "own", 422, "invalid_request"),
    ("limit empty", "GET", "/v1/jobs?limit=", "own", 422, "invalid_request"),
    ("limit 1.5", "GET", "/v1/jobs?limit=1.5", "own", 422, "invalid_request"),
    ("limit over", "GET", "/v1/jobs?limit=201", "own", 422, "invalid_request"),
    ("offset negative", "GET", "/v1/jobs?offset=-1", "own", 422, "invalid_request"),
    ("offset huge", "GET", "/v1/jobs?offset=" + "9" * 5000, "own", 422, "invalid_request"),
    ("status unknown", "GET", "/v1/jobs?status=nope", "own", 422, "invalid_request"),
    ("status empty", "GET", "/v1/jobs?status=", "own", 422, "invalid_request"),
    ("status undecodable", "GET", "/v1/jobs?status=%ff", "own", 422, "invalid_request"),
    ("ops view, client key", "GET", "/v1/ops/stuck-jobs", "own", 403, "admin_only"),
    ("unknown ops view, client key", "GET", "/v1/ops/nope", "own", 403, "admin_only"),
    ("ops deliveries, client key", "GET", "/v1/ops/webhook-deliveries", "own", 403, "admin_only"),
    ("unknown ops view", "GET", "/v1/ops/nope", "admin", 404, "unknown_view"),
    ("ops view NUL", "GET", "/v1/ops/%00", "admin", 404, "unknown_view"),
    ("ops view 10000 chars", "GET", "/v1/ops/" + "a" * 10000, "admin", 404, "unknown_view"),
    ("ops limit 0", "GET", "/v1/ops/stuck-jobs?limit=0", "admin", 422, "invalid_request"),
    ("ops limit text", "GET", "/v1/ops/page-usage?limit=true", "admin", 422, "invalid_request"),
    (
        "ops delivery status",
        "GET",
        "/v1/ops/webhook-deliveries?status=DEAD",
        "admin",
        422,
        "invalid_request",
    ),
    ("replay not a uuid", "POST", "/v1/webhook-deliveries/x/replay", "own", 422, "invalid_request"),
    (
        "replay unknown",
        "POST",
        f"/v1/webhook-deliveries/{ZERO}/replay",
        "own",
        404,
        "delivery_not_found",
    ),
    (
        "replay unknown, admin",
        "POST",
        f"/v1/webhook-deliveries/{ZERO}/replay",
        "admin",
        404,
        "delivery_not_found",
    ),
    (
        "rotate overlap negative",
        "POST",
        "/v1/webhooks/secret/rotate?overlap_s=-1",
        "own",
        422,
        "invalid_request",
    ),
    (
        "rotate overlap 10**30",
        "POST",
        f"/v1/webhooks/secret/rotate?overlap_s={10**30}",
        "own",
        422,
        "invalid_request",
    ),
    (
        "rotate overlap text",
        "POST",
        "/v1/webhooks/secret/rotate?overlap_s=x",
        "own",
        422,
        "invalid_request",
    ),
    ("no key", "GET", "/v1/jobs/{job}", "none", 401, "missing_api_key"),
    ("key without scheme", "GET", "/v1/usage", "{key}", 401, "missing_api_key"),
    ("Bearer alone", "GET", "/v1/usage", "Bearer", 401, "missing_api_key"),
    ("Basic scheme", "GET", "/v1/usage", "Basic dXNlcjpwYXNz", 401, "missing_api_key"),
    ("key of another prefix", "GET", "/v1/usage", "Bearer sk_{key}", 401, "invalid_api_key"),
    (
        "key 8000 chars",
        "GET",
        "/v1/usage",
        "Bearer pm_" + "a" * 8000 + "_b",
        401,
        "invalid_api_key",
    ),
    ("key with empty prefix", "GET", "/v1/usage", "Bearer pm__abc", 401, "invalid_api_key"),
    ("key with control byte", "GET", "/v1/usage", "Bearer pm_a\x01b_c", 401, "invalid_api_key"),
    ("PUT a job", "PUT", "/v1/jobs/{job}", "own", 405, "method_not_allowed"),
    ("PATCH a job", "PATCH", "/v1/jobs/{job}", "own", 405, "method_not_allowed"),
    ("OPTIONS a job", "OPTIONS", "/v1/jobs/{job}", "own", 405, "method_not_allowed"),
    (
        "DELETE a page",
        "DELETE",
        "/v1/jobs/{job}/pages/1/markdown",
        "own",
        405,
        "method_not_allowed",
    ),
    ("POST usage", "POST", "/v1/usage", "own", 405, "method_not_allowed"),
    (
        "GET a replay",
        "GET",
        f"/v1/webhook-deliveries/{ZERO}/replay",
        "own",
        405,
        "method_not_allowed",
    ),
    ("unknown address", "GET", "/v1/jobs/{job}/nothing", "own", 404, "not_found"),
]


def _headers(who: str, api: httpx.Client) -> dict[str, str]:
    key = str(api.headers["Authorization"])[7:]
    if who == "own":
        return {"Authorization": f"Bearer {key}"}
    if who == "other":
        return {"Authorization": f"Bearer {make_client_key()}"}
    if who == "admin":
        return {"Authorization": f"Bearer {make_client_key(admin=True)}"}
    if who == "none":
        return {}
    return {"Authorization": who.replace("{key}", key)}


@pytest.mark.parametrize(
    ("name", "method", "path", "who", "status", "code"), REFUSALS, ids=[r[0] for r in REFUSALS]
)
def test_hostile_reads_are_clear_refusals(
    api: httpx.Client,
    api_url: str,
    job_id: str,
    name: str,
    method: str,
    path: str,
    who: str,
    status: int,
    code: str,
) -> None:
    with httpx.Client(base_url=api_url, timeout=60) as client:
        response = client.request(method, path.replace("{job}", job_id), headers=_headers(who, api))
    assert_clear_error(response, status, code)
    # Whatever was refused, the job and its results are as they were.
    assert api.get(f"/v1/jobs/{job_id}").json()["status"] == "succeeded"
    assert api.get(f"/v1/jobs/{job_id}/pages/1/markdown").content == PAGE_MARKDOWN


def test_a_revoked_key_is_refused_everywhere(api_url: str, s3: ObjectStore, db: str) -> None:
    key = make_client_key()
    job_id = add_stored_job(s3, key)
    with psycopg.connect(_database(), autocommit=True) as conn:
        conn.execute(
            "UPDATE clients SET disabled_at = now() WHERE api_key_prefix = %s",
            (key.split("_")[1],),
        )
    with httpx.Client(
        base_url=api_url, headers={"Authorization": f"Bearer {key}"}, timeout=60
    ) as client:
        for method, path in [
            ("GET", f"/v1/jobs/{job_id}"),
            ("GET", f"/v1/jobs/{job_id}/pages/1/blocks"),
            ("GET", f"/v1/jobs/{job_id}/invoice"),
            ("GET", "/v1/usage"),
            ("DELETE", f"/v1/jobs/{job_id}?purge=true"),
            ("POST", "/v1/webhooks/secret/rotate"),
        ]:
            assert_clear_error(client.request(method, path), 401, "invalid_api_key")
    assert s3.exists(JobKeys(job_id).page_markdown(1, None))


def test_a_body_on_an_endpoint_that_takes_none_is_ignored(api: httpx.Client, job_id: str) -> None:
    for content_type, body in [
        ("application/json", b"[1, 2]"),
        ("application/json", b'{"a": NaN, "b": Infinity}'),
        ("application/json", b"[" * 100_000 + b"]" * 100_000),
        ("application/json", b'{"a":'),
        ("text/plain", b"\xff\xfe"),
        ("multipart/form-data", b"--b\r\n"),
    ]:
        headers = {"Content-Type": content_type}
        got = api.request("GET", f"/v1/jobs/{job_id}", content=body, headers=headers)
        assert got.status_code == 200, (body[:20], got.text)
        usage = api.request("GET", "/v1/usage", content=body, headers=headers)
        assert usage.status_code == 200, (body[:20], usage.text)
        unknown = api.request("DELETE", f"/v1/jobs/{ZERO}", content=body, headers=headers)
        assert_clear_error(unknown, 404, "job_not_found")


# --- Defects found by this review, each fixed.


def _blocked_on_pages(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'"
        " AND application_name = %s AND query LIKE 'SELECT pages.%%'",
        (DB_NAME, API_APPLICATION_NAME),
    ).fetchone()
    return row is not None and row[0] > 0


def _read_across_a_purge(
    api: httpx.Client, s3: ObjectStore, job_id: str, path: str
) -> httpx.Response:
    """GET `path` so that the job is read before its purge begins and its object after
    the purge removed it: the request is held at its page lookup (a lock on `pages`)
    while the job is purged."""
    with psycopg.connect(_database()) as locker, ThreadPoolExecutor(1) as pool:
        locker.execute("LOCK TABLE pages IN ACCESS EXCLUSIVE MODE")
        pending = pool.submit(api.get, path)
        with psycopg.connect(_database(), autocommit=True) as watcher:
            deadline = time.monotonic() + 30
            while not _blocked_on_pages(watcher):
                assert time.monotonic() < deadline, "the request never reached its page lookup"
                assert not pending.done(), pending.result().text
                time.sleep(0.05)
        with session_scope() as session:
            purge.purge_job(session, s3, uuid.UUID(job_id))
        locker.rollback()
        return pending.result(timeout=60)


@pytest.mark.parametrize("suffix", ["blocks", "markdown"])
def test_a_page_read_while_its_job_is_purged_is_410(
    api: httpx.Client, s3: ObjectStore, job_id: str, suffix: str
) -> None:
    """Once 404 blocks_not_available ("read before blocks were kept") for the blocks and
    a 500 for the Markdown: the purge removed the object between the request's look at
    the job and its read of the object."""
    response = _read_across_a_purge(api, s3, job_id, f"/v1/jobs/{job_id}/pages/1/{suffix}")
    assert_clear_error(response, 410, "purged")


def test_head_is_answered_as_get_without_a_body(
    api: httpx.Client, api_url: str, job_id: str
) -> None:
    """Once 405 for every address: HEAD must be served wherever GET is (RFC 9110, 9.1)."""
    for path, content_type in [
        (f"/v1/jobs/{job_id}", "application/json"),
        (f"/v1/jobs/{job_id}/markdown", "text/markdown; charset=utf-8"),
        (f"/v1/jobs/{job_id}/pages/1/blocks", "application/json"),
        ("/v1/usage", "application/json"),
        ("/healthz", "application/json"),
    ]:
        head, get = api.head(path), api.get(path)
        assert head.status_code == get.status_code == 200, (path, head.headers)
        assert head.content == b""
        assert head.headers["content-type"] == get.headers["content-type"] == content_type
        if "content-length" in get.headers:
            assert head.headers["content-length"] == get.headers["content-length"]
    assert api.head(f"/v1/jobs/{ZERO}").status_code == 404
    assert api.head(f"/v1/jobs/{job_id}/pages/9/blocks").status_code == 404
    assert httpx.head(f"{api_url}/v1/jobs/{job_id}").status_code == 401
    rotate = api.head("/v1/webhooks/secret/rotate")
    assert rotate.status_code == 405 and rotate.headers["allow"] == "POST"


def test_a_repeated_query_parameter_is_refused(api: httpx.Client, job_id: str) -> None:
    """Once the last value was used and the others dropped without a word:
    ?status=succeeded&status=failed listed the failed jobs only."""
    admin = {"Authorization": f"Bearer {make_client_key(admin=True)}"}
    for path, headers in [
        ("/v1/jobs?status=succeeded&status=failed", {}),
        ("/v1/jobs?limit=1&limit=2", {}),
        (f"/v1/jobs/{job_id}?x=1&x=1", {}),
        ("/v1/ops/stuck-jobs?offset=0&offset=1", admin),
        ("/v1/ops/webhook-deliveries?status=dead&status=pending", admin),
    ]:
        response = api.get(path, headers=headers)
        assert_clear_error(response, 422, "invalid_request")
        assert "more than once" in response.json()["error"]["message"], path
    purge_twice = api.delete(f"/v1/jobs/{job_id}?purge=false&purge=true")
    assert_clear_error(purge_twice, 422, "invalid_request")
    assert api.get(f"/v1/jobs/{job_id}/pages/1/markdown").content == PAGE_MARKDOWN
    rotate = api.post("/v1/webhooks/secret/rotate?overlap_s=0&overlap_s=60")
    assert_clear_error(rotate, 422, "invalid_request")
    # Given once, each is served as before.
    assert api.get("/v1/jobs?status=succeeded").json()["jobs"][0]["id"] == job_id
    assert api.post("/v1/webhooks/secret/rotate?overlap_s=0").status_code == 200


def test_reads_and_purges_at_once_give_only_results_or_410(
    api: httpx.Client, s3: ObjectStore, job_id: str
) -> None:
    """Many readers while the job is purged twice at once: each read gets the result or
    410, each purge 200."""
    paths = [
        f"/v1/jobs/{job_id}/pages/1/blocks",
        f"/v1/jobs/{job_id}/invoice",
        f"/v1/jobs/{job_id}/markdown",
    ]
    bodies = {paths[0]: PAGE_BLOCKS, paths[1]: INVOICE, paths[2]: DOCUMENT}
    seen: list[tuple[str, int, bytes]] = []
    stop = threading.Event()

    def read(path: str) -> None:
        while not stop.is_set():
            response = api.get(path)
            seen.append((path, response.status_code, response.content))
            if response.status_code == 410:
                return

    with ThreadPoolExecutor(len(paths) * 2 + 2) as pool:
        readers = [pool.submit(read, path) for path in paths * 2]
        time.sleep(0.3)
        purges = [pool.submit(api.delete, f"/v1/jobs/{job_id}?purge=true") for _ in range(2)]
        assert [p.result().status_code for p in purges] == [200, 200]
        time.sleep(0.3)
        stop.set()
        for reader in readers:
            reader.result()
    for path, status, content in seen:
        assert status in (200, 410), (path, status, content[:200])
        if status == 200:
            assert content == bodies[path]
