"""Uploads under load, against the real API process: a crowd of uploads that are slow
to inspect gets 202 or 503 `busy` with Retry-After (never a 4xx that calls the
document bad), no database connection idles in a transaction while they are
inspected, and a small GET stays fast meanwhile."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import psycopg
import pymupdf
import pytest

from pagemill.storage import ObjectStore
from tests.api.test_auth_and_input import count_rows, stored_objects
from tests.conftest import DB_NAME, PG_ADMIN_URL, SAMPLES, TMP_ROOT, make_client_key
from tests.support import services

UPLOADS = 24
INSPECT_CONCURRENCY = 1
QUEUE_WAIT_S = 3.0
# The documented bound: a small GET answers within this while uploads are inspected.
SMALL_REQUEST_BOUND_S = 5.0
# Far below an inspection (about a second alone, several under load), far above the
# gaps between one request's statements.
IDLE_IN_TRANSACTION_BOUND_S = 1.0


def slow_to_inspect_pdf(strokes: int = 60_000) -> bytes:
    """One page of many random strokes behind a broken cross-reference table:
    inspection has to repair the file and draw the page to know it is readable,
    about a second of CPU here."""
    document = pymupdf.open()
    page = document.new_page(width=600, height=800)
    shuffle = random.Random(7)
    content = "\n".join(
        f"{shuffle.uniform(0, 600):.1f} {shuffle.uniform(0, 800):.1f} m "
        f"{shuffle.uniform(0, 600):.1f} {shuffle.uniform(0, 800):.1f} l S"
        for _ in range(strokes)
    ).encode()
    stream = document.get_new_xref()
    document.update_object(stream, "<<>>")
    document.update_stream(stream, content, compress=False)
    document.xref_set_key(page.xref, "Contents", f"{stream} 0 R")
    data = document.tobytes(garbage=0, deflate=False)
    return data[: data.rfind(b"startxref")] + b"startxref\n0\n%%EOF\n"


# These APIs' name in pg_stat_activity: a worker of the test session, on the same
# database, is not what the idle-in-transaction bound is about.
CROWDED_API_NAME = "pagemill-crowded-api"


def start_api(port: int, concurrency: int, inspect_timeout_s: float) -> Any:
    env = {
        **os.environ,
        "PAGEMILL_API_BASE_URL": f"http://127.0.0.1:{port}",
        "PAGEMILL_INSPECT_CONCURRENCY": str(concurrency),
        "PAGEMILL_INSPECT_QUEUE_WAIT_S": str(QUEUE_WAIT_S),
        "PAGEMILL_INSPECT_TIMEOUT_S": str(inspect_timeout_s),
        "PAGEMILL_RATE_LIMIT": "100000/minute",
        "PAGEMILL_QUEUE_PREFIX": f"crowd{port}-",
        "PAGEMILL_DATABASE_APPLICATION_NAME": CROWDED_API_NAME,
    }
    return services.start_api(env, TMP_ROOT / f"crowded-api-{port}.log", port)


@pytest.fixture(scope="module")
def crowded_api_process(database_url: str, s3: Any, redis_client: Any) -> Iterator[str]:
    # Shared by the module's crowded tests: each waits for its own uploads' answers,
    # so none leaves an inspection running for the next.
    port = services.free_port()
    process = start_api(port, INSPECT_CONCURRENCY, inspect_timeout_s=20)
    yield f"http://127.0.0.1:{port}"
    services.stop(process)


@pytest.fixture()
def crowded_api(db: str, crowded_api_process: str) -> str:
    return crowded_api_process


@pytest.fixture()
def unbounded_api(db: str, s3: Any, redis_client: Any) -> Iterator[str]:
    """Every upload inspected at once, each with little time: the overload the
    bound exists to prevent, to see that it is still reported as overload."""
    port = services.free_port()
    process = start_api(port, UPLOADS, inspect_timeout_s=4)
    yield f"http://127.0.0.1:{port}"
    services.stop(process)


class Sampler:
    """Runs `probe` every `interval_s` on a thread until stopped; keeps what it returns."""

    def __init__(self, probe: Any, interval_s: float) -> None:
        self.samples: list[Any] = []
        self._probe, self._interval_s = probe, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(self._probe())
            self._stop.wait(self._interval_s)


def longest_idle_in_transaction_s(connection: psycopg.Connection[Any]) -> float:
    """How long the longest-waiting connection of these APIs to the test database has
    sat idle inside a transaction (0 if none). Gaps of milliseconds between a request's
    statements are normal; a connection held across an inspection sits for seconds."""
    row = connection.execute(
        "SELECT coalesce(max(extract(epoch FROM now() - state_change)), 0) "
        "FROM pg_stat_activity WHERE datname = %s AND application_name = %s "
        "AND state LIKE 'idle in transaction%%'",
        (DB_NAME, CROWDED_API_NAME),
    ).fetchone()
    assert row is not None
    return float(row[0])


def test_a_crowd_of_slow_uploads_gets_202_or_503_busy_and_small_requests_stay_fast(
    crowded_api: str, s3: ObjectStore
) -> None:
    headers = {"Authorization": f"Bearer {make_client_key()}"}
    slow = slow_to_inspect_pdf()
    limits = httpx.Limits(max_connections=UPLOADS + 4)
    with (
        httpx.Client(base_url=crowded_api, headers=headers, timeout=120, limits=limits) as uploads,
        httpx.Client(base_url=crowded_api, headers=headers, timeout=120) as small,
        psycopg.connect(PG_ADMIN_URL, autocommit=True) as watcher,
    ):
        invoice = (SAMPLES / "invoice-multipage.pdf").read_bytes()
        known = small.post("/v1/jobs", files={"file": ("invoice.pdf", invoice)})
        assert known.status_code == 202, known.text
        job_url = f"/v1/jobs/{known.json()['id']}"
        jobs_before, objects_before = count_rows("jobs"), set(stored_objects(s3))

        def upload(number: int) -> tuple[httpx.Response, float]:
            started = time.monotonic()
            answer = uploads.post(
                "/v1/jobs",
                files={"file": (f"slow-{number}.pdf", slow)},
                headers={"Idempotency-Key": f"crowd-{number}"},
            )
            return answer, time.monotonic() - started

        def timed_get() -> float:
            started = time.monotonic()
            assert small.get(job_url).status_code == 200
            return time.monotonic() - started

        with (
            Sampler(lambda: longest_idle_in_transaction_s(watcher), 0.1) as database,
            Sampler(timed_get, 0.2) as latency,
            ThreadPoolExecutor(UPLOADS) as pool,
        ):
            answers = list(pool.map(upload, range(UPLOADS)))

        # A busy answer frees its Idempotency-Key: the same request, sent again once
        # the crowd has gone, is accepted.
        turned_away = next(n for n, (a, _) in enumerate(answers) if a.status_code == 503)
        again, _ = upload(turned_away)
        assert again.status_code == 202, again.text

    statuses = [answer.status_code for answer, _ in answers]
    assert set(statuses) <= {202, 503}, [a.text for a, _ in answers if a.status_code != 202]
    accepted = statuses.count(202)
    assert accepted >= 1 and statuses.count(503) >= 1, statuses
    for answer, seconds in answers:
        if answer.status_code == 503:
            assert answer.json()["error"]["code"] == "busy"
            assert int(answer.headers["retry-after"]) >= 1
            # Turned away after the bounded wait, not after a whole inspection timeout.
            assert seconds < QUEUE_WAIT_S + 15
    # A refused upload leaves nothing behind; an accepted one is a job with its source.
    assert count_rows("jobs") == jobs_before + accepted + 1
    new_objects = set(stored_objects(s3)) - objects_before
    assert len(new_objects) == accepted + 1
    assert all(key.endswith("/source") for key in new_objects)

    assert max(database.samples) < IDLE_IN_TRANSACTION_BOUND_S, "a connection was held idle"
    assert len(latency.samples) >= 5
    assert max(latency.samples) < SMALL_REQUEST_BOUND_S, sorted(latency.samples)[-5:]


def test_no_connection_waits_in_a_transaction_while_an_upload_streams(crowded_api: str) -> None:
    boundary = "pagemill-slow-body"
    pdf = (SAMPLES / "invoice-multipage.pdf").read_bytes()
    step = len(pdf) // 10 + 1

    def trickle() -> Iterator[bytes]:
        yield (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            'filename="trickled.pdf"\r\nContent-Type: application/pdf\r\n\r\n'
        ).encode()
        for start in range(0, len(pdf), step):
            time.sleep(0.3)  # about 3 s for the whole body
            yield pdf[start : start + step]
        yield f"\r\n--{boundary}--\r\n".encode()

    headers = {
        "Authorization": f"Bearer {make_client_key()}",
        "Content-Type": f"multipart/form-data; boundary={boundary}",
    }
    with (
        psycopg.connect(PG_ADMIN_URL, autocommit=True) as watcher,
        Sampler(lambda: longest_idle_in_transaction_s(watcher), 0.1) as database,
        httpx.Client(base_url=crowded_api, timeout=120) as client,
    ):
        answer = client.post("/v1/jobs", content=trickle(), headers=headers)
    assert answer.status_code == 202, answer.text
    assert len(database.samples) >= 10
    assert max(database.samples) < IDLE_IN_TRANSACTION_BOUND_S


def test_an_inspection_starved_by_load_is_503_busy_not_a_bad_document(
    unbounded_api: str, s3: ObjectStore
) -> None:
    # Two cores shared by every inspection at once: each gets a small share of one and
    # passes its time limit having computed for a fraction of it.
    headers = {"Authorization": f"Bearer {make_client_key()}"}
    slow = slow_to_inspect_pdf()
    limits = httpx.Limits(max_connections=UPLOADS + 4)
    with httpx.Client(base_url=unbounded_api, headers=headers, timeout=120, limits=limits) as api:

        def upload(number: int) -> httpx.Response:
            return api.post("/v1/jobs", files={"file": (f"slow-{number}.pdf", slow)})

        with ThreadPoolExecutor(UPLOADS) as pool:
            answers = list(pool.map(upload, range(UPLOADS)))
    busy = [answer for answer in answers if answer.status_code == 503]
    assert {answer.status_code for answer in answers} <= {202, 503}, [a.text for a in answers]
    assert busy, "no inspection passed its time limit: the load was too light to test"
    for answer in busy:
        assert answer.json()["error"]["code"] == "busy"
        assert "too busy" in answer.json()["error"]["message"]
        assert int(answer.headers["retry-after"]) >= 1
