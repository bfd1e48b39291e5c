"""A submission that fails after its upload was stored leaves nothing behind: no job,
no source object, no claimed Idempotency-Key. The failures are real ones, raised by
Postgres itself (a trigger on the request's marked rows) at each step that follows the
upload: recording the job, storing the idempotent answer, and the commit."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import psycopg
import pytest

from pagemill.storage import ObjectStore
from tests.api.test_auth_and_input import count_rows, stored_objects
from tests.conftest import SAMPLES, TEST_ENV

SCAN = SAMPLES / "scanned-sentence.pdf"

# Only rows carrying these markers fail, so nothing else the session runs is touched.
REFUSED_INSERT = "refused-at-insert.pdf"
REFUSED_COMMIT = "refused-at-commit.pdf"
REFUSED_ANSWER_KEY = "refused-answer"

INSTALL = f"""
CREATE FUNCTION pagemill_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'refused by the test: %', TG_NAME;
END $$;
CREATE TRIGGER test_refuse_insert BEFORE INSERT ON jobs FOR EACH ROW
    WHEN (NEW.source_filename = '{REFUSED_INSERT}') EXECUTE FUNCTION pagemill_test_refuse();
CREATE CONSTRAINT TRIGGER test_refuse_commit AFTER INSERT ON jobs
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.source_filename = '{REFUSED_COMMIT}') EXECUTE FUNCTION pagemill_test_refuse();
CREATE TRIGGER test_refuse_answer BEFORE UPDATE ON idempotency_keys FOR EACH ROW
    WHEN (NEW.key = '{REFUSED_ANSWER_KEY}' AND NEW.response_status IS NOT NULL)
    EXECUTE FUNCTION pagemill_test_refuse();
"""
REMOVE = """
DROP TRIGGER IF EXISTS test_refuse_insert ON jobs;
DROP TRIGGER IF EXISTS test_refuse_commit ON jobs;
DROP TRIGGER IF EXISTS test_refuse_answer ON idempotency_keys;
DROP FUNCTION IF EXISTS pagemill_test_refuse();
"""


@pytest.fixture()
def refusing_database(db: str) -> Iterator[None]:
    url = TEST_ENV["PAGEMILL_DATABASE_URL"].replace("+psycopg", "")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(REMOVE)
        conn.execute(INSTALL)
    try:
        yield
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(REMOVE)


def _post(api_url: str, api_key: str, filename: str, key: str) -> httpx.Response:
    # A connection of its own: the server closes it after a failed request.
    headers = {"Authorization": f"Bearer {api_key}", "Idempotency-Key": key}
    field = {"file": (filename, SCAN.read_bytes(), "application/pdf")}
    return httpx.post(f"{api_url}/v1/jobs", files=field, headers=headers, timeout=60)


@pytest.mark.parametrize(
    ("filename", "key"),
    [
        (REFUSED_INSERT, "insert fails"),
        ("s.pdf", REFUSED_ANSWER_KEY),
        (REFUSED_COMMIT, "commit fails"),
    ],
    ids=["recording the job", "storing the idempotent answer", "the commit"],
)
@pytest.mark.usefixtures("refusing_database")
def test_a_failure_after_the_upload_is_stored_leaves_nothing(
    api_url: str, api_key: str, s3: ObjectStore, filename: str, key: str
) -> None:
    before = stored_objects(s3)
    response = _post(api_url, api_key, filename, key)
    assert response.status_code == 500, response.text
    assert response.json()["error"]["code"] == "internal_error"
    assert count_rows("jobs") == 0
    assert stored_objects(s3) == before
    # The key is not left claimed: a retry is not told the request is still in flight.
    assert count_rows("idempotency_keys") == 0


@pytest.mark.usefixtures("refusing_database")
def test_a_batch_whose_job_cannot_be_recorded_leaves_nothing(
    api_url: str, api_key: str, s3: ObjectStore
) -> None:
    before = stored_objects(s3)
    for filename in (REFUSED_INSERT, REFUSED_COMMIT):
        headers = {"Authorization": f"Bearer {api_key}"}
        files = [
            ("file", ("first.pdf", SCAN.read_bytes(), "application/pdf")),
            ("file", (filename, SCAN.read_bytes(), "application/pdf")),
        ]
        response = httpx.post(f"{api_url}/v1/batches", files=files, headers=headers, timeout=60)
        assert response.status_code == 500, (filename, response.text)
        assert response.json()["error"]["code"] == "internal_error"
        assert count_rows("jobs") == 0 and count_rows("batches") == 0
        assert stored_objects(s3) == before, filename
