"""Property tests of the submit form against the real API process, Postgres and S3.

Hypothesis generates the form a careless or hostile client could send: any JSON the
standard allows, the values Python's json also reads (NaN, Infinity), odd Unicode
(NUL, lone surrogates, invalid UTF-8), deep nesting, huge numbers, odd page ranges,
webhook URLs, filenames and options. Whatever arrives, the answer is 202 or a 4xx
with an error code; a 4xx leaves no job row and no object, and frees its
Idempotency-Key; the client's job list and job status still answer 200.

About 120 examples in all: 80 s with set-up at a load of 12 on 2 cores. The API runs
on queues no worker reads, so accepted jobs cost nothing after submit.
"""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pymupdf
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pagemill.clients.keys import prefix_of
from pagemill.storage import ObjectStore
from tests.api.test_auth_and_input import stored_objects
from tests.conftest import TEST_ENV, TMP_ROOT, make_client_key
from tests.support import services

# No example database: nothing is written into the checkout, and every run explores.
PROPERTY_SETTINGS = settings(
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _small_pdf(pages: int) -> bytes:
    document = pymupdf.open()
    for number in range(pages):
        document.new_page(width=200, height=200).insert_text((20, 40), f"page {number + 1}")
    return document.tobytes()


THREE_PAGES = _small_pdf(3)


@pytest.fixture(scope="module")
def quiet_api(database_url: str, s3: Any, redis_client: Any) -> Iterator[str]:
    """An API whose queues no worker reads, with a rate limit the test cannot reach."""
    port = services.free_port()
    env = {
        **os.environ,
        "PAGEMILL_API_BASE_URL": f"http://127.0.0.1:{port}",
        "PAGEMILL_QUEUE_PREFIX": f"{TEST_ENV['PAGEMILL_QUEUE_PREFIX']}props{port}-",
        "PAGEMILL_RATE_LIMIT": "100000/minute",
    }
    process = services.start_api(env, TMP_ROOT / f"props-api-{port}.log", port)
    yield f"http://127.0.0.1:{port}"
    services.stop(process)


@pytest.fixture()
def client(quiet_api: str, db: str) -> Iterator[httpx.Client]:
    key = make_client_key()
    with httpx.Client(
        base_url=quiet_api, headers={"Authorization": f"Bearer {key}"}, timeout=60
    ) as http:
        yield http


# -- what a client may send --------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
standard_json = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
lone_surrogate = st.integers(0xD800, 0xDFFF).map(lambda code: f'"\\u{code:04x}"')
python_only_values = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e999"])
huge_number = st.builds(
    lambda sign, digits, exponent: f"{sign}{'9' * digits}{exponent}",
    st.sampled_from(["", "-"]),
    st.integers(15, 6000),
    st.sampled_from(["", ".5", "e10", "e400", "E-400"]),
)
deep = st.builds(
    lambda depth, brackets: brackets[0] * depth + "0" + brackets[1] * depth,
    st.integers(20, 3000),
    st.sampled_from([("[", "]"), ('{"a": ', "}")]),
).map(lambda nested: f'{{"a": {nested}}}')
odd_value = python_only_values | lone_surrogate | huge_number | st.just('"\\u0000"')
metadata_text = st.one_of(
    standard_json.map(lambda value: json.dumps({"value": value})),
    standard_json.map(json.dumps),  # also arrays, scalars: not an object
    odd_value.map(lambda raw: f'{{"k": {raw}}}'),
    odd_value.map(lambda raw: f'{{"k": [1, {{"x": {raw}}}]}}'),
    lone_surrogate.map(lambda raw: f"{{{raw}: 1}}"),
    deep,
    st.text(max_size=40),
)
metadata_field = metadata_text.map(lambda text: text.encode("utf-8", "surrogatepass")) | st.binary(
    max_size=40
)

page_number = (st.integers(0, 5) | st.integers(0, 10**12)).map(str) | st.just("9" * 5000)
page_part = page_number | st.builds(lambda a, b: f"{a}-{b}", page_number, page_number)
within_three = st.integers(1, 3).map(str) | st.sampled_from(["1-3", "2-3", " 1 - 2 "])
pages_field = st.one_of(
    st.lists(within_three, min_size=1, max_size=4).map(",".join),
    st.lists(page_part, min_size=1, max_size=6).map(",".join),
    st.lists(page_part, min_size=60, max_size=120).map(",".join),
    st.text(max_size=20),
    st.sampled_from(["", " ", "3,1", "\u0661", "1-", "-", ",", "1,,2", "1-3,9999999999"]),
)

webhook_field = st.one_of(
    st.sampled_from(
        [
            "http://[::1/",
            "http://[::1]:99999/",
            "http://example.com:port/",
            "https://example.com/hook",
            "http://0251.0376.0251.0376/",
            "http://example.com/\r\nX: y",
            "http://exa\x00mple.com/",
            "http://",
            "https://[fe80::1%25eth0]/",
            "ftp://example.com/",
            "http://example.com/" + "a" * 3000,
        ]
    ),
    st.builds(
        lambda scheme, host, rest: f"{scheme}://{host}{rest}",
        st.sampled_from(["http", "https", "HTTP", "javascript", ""]),
        st.text(max_size=15),
        st.text(max_size=15),
    ),
    st.text(max_size=30),
)

engine_field = st.sampled_from(["auto", "textlayer", "rapidocr", "vllm", ""]) | st.text(max_size=10)
furniture_field = st.sampled_from(["separate", "inline", "drop", ""]) | st.text(max_size=10)
licence_field = st.sampled_from(["commercial", "non_commercial", "non_commercial", "free", ""])
budget_field = st.decimals(0, 10, places=4).map(str) | st.sampled_from(
    ["5.00", "1e999", "NaN", "-1", "1e-30", "9" * 5000, "", "five"]
)
filename_field = st.text(max_size=20) | st.text(min_size=400, max_size=700)


def form_fields() -> st.SearchStrategy[dict[str, bytes]]:
    return st.fixed_dictionaries(
        {},
        optional={
            "metadata": metadata_field,
            "pages": pages_field.map(_utf8),
            "webhook_url": webhook_field.map(_utf8),
            "engine": engine_field.map(_utf8),
            "furniture": furniture_field.map(_utf8),
            "license_use": licence_field.map(_utf8),
            "max_cost_usd": budget_field.map(_utf8),
        },
    )


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


# -- what must hold ------------------------------------------------------------------


def _jobs_of(http: httpx.Client) -> int:
    key = str(http.headers["Authorization"])[7:]
    url = TEST_ENV["PAGEMILL_DATABASE_URL"].replace("+psycopg", "")
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM jobs JOIN clients ON clients.id = jobs.client_id "
            "WHERE clients.api_key_prefix = %s",
            (prefix_of(key),),
        ).fetchone()
    assert row is not None
    return int(row[0])


def _submit(
    http: httpx.Client, fields: dict[str, bytes], filename: str, key: str | None
) -> httpx.Response:
    parts: list[tuple[str, Any]] = [(name, (None, value)) for name, value in fields.items()]
    parts.append(("file", (filename, THREE_PAGES, "application/pdf")))
    headers = {"Idempotency-Key": key} if key else {}
    return http.post("/v1/jobs", files=parts, headers=headers)


def _job_prefixes(s3: ObjectStore) -> set[str]:
    """The `jobs/{id}` prefixes that hold any object."""
    return {"/".join(key.split("/")[:2]) for key in stored_objects(s3)}


def _check_submission(
    http: httpx.Client,
    s3: ObjectStore,
    fields: dict[str, bytes],
    filename: str,
    with_key: bool,
    outcomes: Counter[str],
) -> None:
    key = f"prop-{uuid.uuid4().hex}" if with_key else None
    jobs_before, prefixes_before = _jobs_of(http), _job_prefixes(s3)
    try:
        response = _submit(http, fields, filename, key)
    except (httpx.InvalidURL, UnicodeEncodeError, ValueError):
        outcomes["not sendable"] += 1  # httpx itself refuses to encode this filename
        return
    # What was sent, short enough to read in a failure report.
    sent = {name: value[:120] for name, value in fields.items()} | {"filename": filename[:60]}
    assert response.status_code == 202 or 400 <= response.status_code < 500, (response.text, sent)
    if response.status_code == 202:
        job_id = response.json()["id"]
        assert _jobs_of(http) == jobs_before + 1
        outcomes["202"] += 1
    else:
        error = response.json()["error"]
        assert error["code"] and error["message"], (response.text, sent)
        assert _jobs_of(http) == jobs_before, (response.text, sent)
        # No job's objects appeared: the worker is still writing results of the jobs
        # earlier examples submitted, so only whole new prefixes can tell.
        assert _job_prefixes(s3) <= prefixes_before, (response.text, sent)
        outcomes[error["code"]] += 1
        job_id = None
        if key is not None:
            # The key is free: a plain request under it is accepted.
            corrected = _submit(http, {}, "plain.pdf", key)
            assert corrected.status_code == 202, (response.text, corrected.text)
            job_id = corrected.json()["id"]
    listed = http.get("/v1/jobs", params={"limit": 200})
    assert listed.status_code == 200, listed.text
    if job_id is not None:
        status = http.get(f"/v1/jobs/{job_id}")
        assert status.status_code == 200, status.text
        assert job_id in {job["id"] for job in listed.json()["jobs"]}


def test_any_submit_form_is_202_or_a_clean_4xx(client: httpx.Client, s3: ObjectStore) -> None:
    outcomes: Counter[str] = Counter()

    @settings(PROPERTY_SETTINGS, max_examples=60)
    @given(fields=form_fields(), filename=filename_field, with_key=st.booleans())
    # One of each kind of refusal besides what the random examples find, so the run
    # always reaches them (60 random forms have found only three kinds).
    @example(fields={"engine": b"no-such-engine"}, filename="a.pdf", with_key=True)
    @example(fields={"metadata": b'{"k": NaN}'}, filename="a.pdf", with_key=False)
    @example(fields={"pages": b"1-"}, filename="a.pdf", with_key=False)
    @example(fields={"webhook_url": b"http://[::1/"}, filename="a.pdf", with_key=False)
    @example(fields={}, filename="a.pdf", with_key=False)
    def submit(fields: dict[str, bytes], filename: str, with_key: bool) -> None:
        _check_submission(client, s3, fields, filename, with_key, outcomes)

    submit()
    # The run reached both sides: accepted jobs and refusals of several kinds.
    assert outcomes["202"] >= 1, outcomes
    assert len([code for code in outcomes if code not in ("202", "not sendable")]) >= 4, outcomes


def test_metadata_alone_is_kept_or_refused_as_invalid_metadata(
    client: httpx.Client, s3: ObjectStore
) -> None:
    outcomes: Counter[str] = Counter()

    @settings(PROPERTY_SETTINGS, max_examples=30)
    @given(raw=metadata_text)
    def submit(raw: str) -> None:
        fields = {"metadata": _utf8(raw)}
        _check_submission(client, s3, fields, "m.pdf", False, outcomes)
        assert set(outcomes) <= {"202", "invalid_metadata"}, (raw[:200], outcomes)

    submit()
    assert outcomes["202"] >= 1 and outcomes["invalid_metadata"] >= 1, outcomes


def test_pages_and_webhook_url_alone_are_kept_or_refused_by_name(
    client: httpx.Client, s3: ObjectStore
) -> None:
    outcomes: Counter[str] = Counter()

    @settings(PROPERTY_SETTINGS, max_examples=30)
    @given(pages=st.none() | pages_field, webhook_url=st.none() | webhook_field)
    def submit(pages: str | None, webhook_url: str | None) -> None:
        fields = {
            name: _utf8(value)
            for name, value in (("pages", pages), ("webhook_url", webhook_url))
            if value is not None
        }
        _check_submission(client, s3, fields, "p.pdf", True, outcomes)
        assert set(outcomes) <= {"202", "invalid_page_range", "invalid_webhook_url"}, outcomes

    submit()
    assert outcomes["invalid_page_range"] >= 1 and outcomes["invalid_webhook_url"] >= 1, outcomes
