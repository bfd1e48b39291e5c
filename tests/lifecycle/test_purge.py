"""Purge: on request, under a running job with a real worker finishing its page after,
and by the reaper once a client's retention has passed. Nothing of a purged job stays in
the bucket, its results answer 410, its row keeps its pages' cost and licence."""

from __future__ import annotations

import subprocess
import time
from typing import Any

import httpx

from pagemill.db.session import session_factory
from pagemill.jobs import reaper
from pagemill.settings import get_settings
from tests.conftest import make_client_key, wait_for_job
from tests.lifecycle.conftest import HeldStack, sql, stored_keys, submit
from tests.support import services

RESULT_PATHS = ("/markdown", "/pages/1/markdown", "/pages/1/blocks")


def assert_results_gone(api: httpx.Client, job_id: str) -> None:
    for path in RESULT_PATHS:
        answer = api.get(f"/v1/jobs/{job_id}{path}")
        assert answer.status_code == 410, (path, answer.text)
        assert answer.json()["error"]["code"] == "purged"


def test_purge_removes_every_object_keeps_the_record_and_is_harmless_twice(
    api: httpx.Client, worker_process: subprocess.Popen[bytes]
) -> None:
    job = wait_for_job(api, submit(api, pages="1-2").json()["id"])
    assert job["status"] == "succeeded", job
    before = stored_keys(job["id"])
    assert f"jobs/{job['id']}/document.md" in before and len(before) >= 5, before
    cost = job["cost_usd"]

    refused = api.delete(f"/v1/jobs/{job['id']}")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "job_finished"

    answer = api.delete(f"/v1/jobs/{job['id']}", params={"purge": "true"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["removed"]["objects"] == len(before)
    assert body["removed"]["by_kind"]["source"] == 1
    assert body["removed"]["by_kind"]["page_markdown"] == 2
    assert body["removed"]["by_kind"]["document"] == body["removed"]["by_kind"]["manifest"] == 1
    assert body["removed"]["bytes"] > 0 and "other" not in body["removed"]["by_kind"]
    assert body["job"]["status"] == "purged" and body["purged_at"]
    assert stored_keys(job["id"]) == []

    record = api.get(f"/v1/jobs/{job['id']}").json()
    assert record["status"] == "purged" and record["purged_at"] == body["purged_at"]
    assert record["cost_usd"] == cost and record["pages"]["succeeded"] == 2
    assert all(page["licence"]["model"] for page in record["page_details"])
    assert_results_gone(api, job["id"])

    again = api.delete(f"/v1/jobs/{job['id']}", params={"purge": "true"})
    assert again.status_code == 200, again.text
    assert again.json()["removed"]["objects"] == 0
    assert again.json()["purged_at"] == body["purged_at"]
    assert stored_keys(job["id"]) == []


def wait_for(check: Any, timeout_s: float, what: str) -> None:
    services.wait_until(check, timeout_s, what)


def test_purge_under_a_running_job_stays_purged_after_the_worker_finishes_its_page(
    held_stack: HeldStack, held_api: httpx.Client
) -> None:
    job_id = submit(held_api, pages="1-2").json()["id"]
    # The worker has prepared the pages and holds page 1 in front of its engine.
    wait_for(lambda: held_stack.held_pages() == [1], 60, "the worker holding page 1")
    assert held_api.get(f"/v1/jobs/{job_id}").json()["status"] == "running"
    assert stored_keys(job_id), "prepare stored the source and pages"

    answer = held_api.delete(f"/v1/jobs/{job_id}", params={"purge": "true"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["job"]["status"] == "purged"
    assert answer.json()["removed"]["by_kind"]["source"] == 1
    assert stored_keys(job_id) == []

    # The worker now reads page 1 and stores its Markdown: the fence makes it take
    # the object back out, and page 2 is never run.
    with held_stack.until_fenced(job_id, "the worker removing what it wrote"):
        held_stack.release()
    assert stored_keys(job_id) == []
    pages = sql("SELECT number, status FROM pages WHERE job_id = %s ORDER BY number", job_id)
    assert [(n, str(s)) for n, s in pages] == [(1, "cancelled"), (2, "cancelled")]
    assert held_api.get(f"/v1/jobs/{job_id}").json()["status"] == "purged"
    assert_results_gone(held_api, job_id)


def test_purge_while_finalize_assembles_leaves_no_document_behind(
    held_stack: HeldStack, held_api: httpx.Client
) -> None:
    held_stack.release()  # pages run; the finalize that follows is held
    job_id = submit(held_api, pages="1").json()["id"]
    wait_for(held_stack.finalize_held, 60, "the worker holding the finalize")
    answer = held_api.delete(f"/v1/jobs/{job_id}", params={"purge": "true"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["removed"]["by_kind"]["page_markdown"] == 1
    assert stored_keys(job_id) == []

    # Finalize now writes document.md and manifest.json, then sees the fence.
    with held_stack.until_fenced(job_id, "finalize removing what it wrote"):
        held_stack.release_finalize()
    assert stored_keys(job_id) == []
    assert held_api.get(f"/v1/jobs/{job_id}").json()["status"] == "purged"


def test_the_reaper_purges_jobs_past_their_clients_retention(
    api: httpx.Client, worker_process: subprocess.Popen[bytes]
) -> None:
    short = api.get("/v1/usage").json()
    assert short["retention_days"] == get_settings().default_retention_days
    job = wait_for_job(api, submit(api, pages="1").json()["id"])
    other_key = make_client_key()
    with httpx.Client(
        base_url=str(api.base_url), headers={"Authorization": f"Bearer {other_key}"}, timeout=60
    ) as other:
        kept = wait_for_job(other, submit(other, pages="1").json()["id"])
    # Both ended three days ago; only the first client keeps results for two days.
    sql("UPDATE jobs SET finished_at = now() - interval '3 days'")
    sql(
        "UPDATE clients SET retention_days = 2 WHERE id = "
        "(SELECT client_id FROM jobs WHERE id = %s)",
        job["id"],
    )
    assert api.get("/v1/usage").json()["retention_days"] == 2

    reap()
    wait_for(lambda: api.get(f"/v1/jobs/{job['id']}").json()["status"] == "purged", 20, "the purge")
    assert stored_keys(job["id"]) == []
    assert_results_gone(api, job["id"])
    assert stored_keys(kept["id"]) and sql(
        "SELECT status::text, purged_at FROM jobs WHERE id = %s", kept["id"]
    ) == [("succeeded", None)]

    # A purge that stopped after its fence (S3 failed, or its process died) is finished.
    sql("UPDATE jobs SET purged_at = now() - interval '1 hour' WHERE id = %s", kept["id"])
    reap()
    wait_for(
        lambda: sql("SELECT status::text FROM jobs WHERE id = %s", kept["id"]) == [("purged",)],
        20,
        "the interrupted purge finished",
    )
    assert stored_keys(kept["id"]) == []


def reap() -> None:
    sessions, settings = session_factory(), get_settings()
    deadline = time.monotonic() + 30
    # The session's worker runs the reaper too; a pass finds the lock held by it at times.
    while reaper.reap_once(sessions, settings) is None and time.monotonic() < deadline:
        time.sleep(0.2)
