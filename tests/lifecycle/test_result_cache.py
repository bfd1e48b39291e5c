"""The result cache: a document sent again with the same options reuses the stored
result, after the API restarted too (the cache is Postgres and S3, not memory); no engine
runs, nothing is charged, only the client's own, unpurged jobs count, and /metrics
counts a hit's pages apart from the pages an engine processed."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import TMP_ROOT, make_client_key, wait_for_job
from tests.lifecycle.conftest import sql, stored_keys, submit
from tests.support import services


@pytest.fixture()
def restarted_api(api_url: str, api_key: str) -> Iterator[httpx.Client]:
    """A new API process beside the session's: nothing a first process kept in memory."""
    port = services.free_port()
    env = {**os.environ, "PAGEMILL_API_BASE_URL": f"http://127.0.0.1:{port}"}
    process = services.start_api(env, TMP_ROOT / "cache-api.log", port)
    try:
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}",
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=60,
        ) as client:
            yield client
    finally:
        services.stop(process)


def page_runs(job_id: str) -> list[tuple[str | None, str | None, float | None]]:
    return sql("SELECT device_kind, worker_id, device_seconds FROM pages WHERE job_id = %s", job_id)


def test_a_cache_hit_after_a_restart_runs_nothing_and_charges_nothing(
    api: httpx.Client, worker_process: subprocess.Popen[bytes], restarted_api: httpx.Client
) -> None:
    first = wait_for_job(api, submit(api, pages="1-2", metadata='{"n": 1}').json()["id"])
    assert first["status"] == "succeeded" and first["cached_from"] is None
    assert all(kind == "cpu" and worker for kind, worker, _ in page_runs(first["id"]))

    answer = submit(restarted_api, pages="2,1", metadata='{"n": 2}')
    assert answer.status_code == 202, answer.text
    hit = answer.json()
    assert (hit["status"], hit["cached_from"]) == ("succeeded", first["id"])
    assert hit["pages"]["succeeded"] == 2 and hit["cost_usd"] == "0"
    assert Decimal(hit["quote_usd"]) == 0 and hit["metadata"] == {"n": 2}
    assert page_runs(hit["id"]) == [("cache", None, 0.0), ("cache", None, 0.0)]
    assert (
        restarted_api.get(f"/v1/jobs/{hit['id']}/markdown").text
        == api.get(f"/v1/jobs/{first['id']}/markdown").text
    )
    page = restarted_api.get(f"/v1/jobs/{hit['id']}/pages/2/markdown")
    assert page.status_code == 200 and page.text
    # The hit's objects are its own: purging the first job leaves them whole.
    assert {key.split("/", 2)[2] for key in stored_keys(hit["id"])} == {
        key.split("/", 2)[2] for key in stored_keys(first["id"])
    }
    usage = api.get("/v1/usage").json()
    assert usage["day"]["used"] == 2, "a cache hit uses no quota"

    fresh = submit(api, pages="1-2", cache="false").json()
    assert (fresh["status"], fresh["cached_from"]) == ("queued", None)
    other_key = make_client_key()
    with httpx.Client(
        base_url=str(api.base_url), headers={"Authorization": f"Bearer {other_key}"}, timeout=60
    ) as other:
        theirs = submit(other, pages="1-2").json()
        assert (theirs["status"], theirs["cached_from"]) == ("queued", None)
        other.delete(f"/v1/jobs/{theirs['id']}")
    api.delete(f"/v1/jobs/{fresh['id']}")

    # A purged result is never served: with both copies purged, the next one runs.
    for job_id in (first["id"], hit["id"]):
        assert api.delete(f"/v1/jobs/{job_id}", params={"purge": "true"}).status_code == 200
    again = submit(api, pages="1-2").json()
    assert (again["status"], again["cached_from"]) == ("queued", None)
    api.delete(f"/v1/jobs/{again['id']}")


def test_a_purged_source_is_not_served_even_while_its_copy_is_being_made(
    api: httpx.Client, worker_process: subprocess.Popen[bytes]
) -> None:
    first = wait_for_job(api, submit(api, pages="1").json()["id"])
    # Fenced but not yet emptied, as a purge in progress leaves it.
    sql("UPDATE jobs SET purged_at = now() WHERE id = %s", first["id"])
    again = submit(api, pages="1").json()
    assert (again["status"], again["cached_from"]) == ("queued", None)
    api.delete(f"/v1/jobs/{again['id']}")


def counted(api_url: str, metric: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of one /metrics counter, by their sorted labels."""
    text = httpx.get(f"{api_url}/metrics", timeout=30).text
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == metric
    }


def test_metrics_count_a_cache_hits_pages_as_cached_not_as_processed_by_their_engine(
    api: httpx.Client, api_url: str, worker_process: subprocess.Popen[bytes]
) -> None:
    first = wait_for_job(api, submit(api, pages="1-2").json()["id"])
    assert first["status"] == "succeeded", first
    by_engine = Counter(page["engine"] for page in first["page_details"])
    hit = submit(api, pages="1-2").json()
    assert (hit["status"], hit["cached_from"]) == ("succeeded", first["id"])

    # Only the first job's pages ran an engine; the hit's two were copied.
    assert counted(api_url, "pagemill_pages_processed_total") == {
        (("engine", engine), ("status", "succeeded")): pages for engine, pages in by_engine.items()
    }
    assert counted(api_url, "pagemill_pages_cached_total") == {
        (("engine", engine),): pages for engine, pages in by_engine.items()
    }
