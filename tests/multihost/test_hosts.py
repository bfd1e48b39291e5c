"""Several hosts, each in its own network namespace (tests/multihost/conftest.py): jobs
run across them; a worker host cut off mid-page loses that page to the other host once
its lease runs out and, back on the network, rejoins without changing what was done;
a host whose clock is hours off keeps to the database's clock.

The tests run in order on one cluster: each leaves it as it found it (both worker
hosts connected, nothing held).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import pymupdf
import pytest
import redis
import time_machine

from pagemill.settings import Settings
from pagemill.storage import ObjectStore, StorageUnavailable
from tests.multihost.conftest import (
    CLUSTER_SETTINGS,
    PAGE_LEASE_S,
    SERVICES,
    W1,
    W2,
    W3,
    Cluster,
    db_now,
    wait_for,
)

# What the earlier test left for the next one to check.
handed_on: dict[str, Any] = {}


def document(tag: str, pages: int) -> bytes:
    """A PDF with a text layer, so pages are read fast and the same on every host."""
    pdf = pymupdf.open()
    for number in range(1, pages + 1):
        page = pdf.new_page()
        # Every page says something of its own: lines repeated on every page would be
        # taken for running headers and kept apart from the text.
        for line, words in enumerate(page_text(tag, number)):
            page.insert_text((72, 90 + 24 * line), words, fontsize=12)
    return bytes(pdf.tobytes())


def page_text(tag: str, number: int) -> list[str]:
    fruit = ["apples", "pears", "plums", "quinces", "cherries", "damsons", "medlars"][number % 7]
    return [
        f"Delivery note {tag} {number}",
        f"{number * 12} crates of {fruit} were shipped to the {tag} warehouse.",
    ]


def submit(cluster: Cluster, tag: str, pages: int) -> str:
    response = cluster.api(
        "POST", "/v1/jobs", files={"file": (f"{tag}.pdf", document(tag, pages), "application/pdf")}
    )
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def job_status(cluster: Cluster, job_id: str) -> str:
    [(status,)] = cluster.sql("SELECT status::text FROM jobs WHERE id = %s", job_id)
    return str(status)


def wait_job(cluster: Cluster, job_id: str, timeout_s: float = 90) -> str:
    ended = ("succeeded", "failed", "cancelled")
    try:
        wait_for(lambda: job_status(cluster, job_id) in ended, timeout_s, f"job {job_id} to end")
    except TimeoutError as error:
        keys = ("number", "status", "attempts", "worker_id", "lease_expires_at", "error")
        rows = [{key: page[key] for key in keys} for page in pages(cluster, job_id)]
        raise TimeoutError(f"{error}; its pages: {rows}") from None
    return job_status(cluster, job_id)


def pages(cluster: Cluster, job_id: str) -> list[dict[str, Any]]:
    rows = cluster.sql(
        "SELECT to_jsonb(pages) FROM pages WHERE job_id = %s ORDER BY number", job_id
    )
    return [row[0] for row in rows]


def host_of(page: dict[str, Any]) -> str | None:
    worker = page["worker_id"]
    return None if worker is None else str(worker).split(":", 1)[0]


def page_row(cluster: Cluster, page_id: int) -> dict[str, Any]:
    [(row,)] = cluster.sql("SELECT to_jsonb(pages) FROM pages WHERE id = %s", page_id)
    return dict(row)


def wait_held(cluster: Cluster, host: str, timeout_s: float = 60) -> dict[str, Any]:
    """The row of the page this host holds in its engine, once it holds one."""
    wait_for(lambda: cluster.held_page(host) is not None, timeout_s, f"{host} to hold a page")
    page_id = cluster.held_page(host)
    assert page_id is not None
    return page_row(cluster, page_id)


def snapshot(cluster: Cluster, job_id: str) -> dict[str, Any]:
    [(job,)] = cluster.sql("SELECT to_jsonb(jobs) FROM jobs WHERE id = %s", job_id)
    return {
        "job": job,
        "pages": pages(cluster, job_id),
        "objects": cluster.objects(f"jobs/{job_id}/"),
    }


def test_jobs_run_across_hosts(cluster: Cluster) -> None:
    # One host holds the first page it gets until the other has finished one: both
    # take pages, whatever order the queue hands them out in.
    cluster.hold(W1)
    job_id = submit(cluster, "across", 6)
    held = wait_held(cluster, W1)
    wait_for(
        lambda: any(host_of(page) == "pm-w2" for page in pages(cluster, job_id)),
        60,
        "the other host to finish a page",
    )
    cluster.release(W1)
    assert wait_job(cluster, job_id) == "succeeded"

    done = pages(cluster, job_id)
    assert {host_of(page) for page in done} == {"pm-w1", "pm-w2"}
    assert host_of(next(page for page in done if page["id"] == held["id"])) == "pm-w1"
    workers = dict(cluster.sql("SELECT id, host FROM workers WHERE stopped_at IS NULL"))
    assert {workers[page["worker_id"]] for page in done} == {"pm-w1", "pm-w2"}
    # Each host wrote its pages to the shared store, by address; the API serves them all.
    objects = cluster.objects(f"jobs/{job_id}/")
    results = {
        f"jobs/{job_id}/pages/{page['number']}.attempt-{page['result_attempt']}.md" for page in done
    }
    assert len(results) == 6 and results <= set(objects)
    markdown = cluster.api("GET", f"/v1/jobs/{job_id}/markdown").text
    for number in range(1, 7):
        assert page_text("across", number)[1] in markdown


def test_a_host_cut_off_mid_page_loses_the_page_after_its_lease(cluster: Cluster) -> None:
    cluster.hold(W1)
    job_id = submit(cluster, "cut", 4)
    held = wait_held(cluster, W1)
    cluster.network.cut(W1)
    handed_on["cut"] = (job_id, held)

    # Its page finishes on the other host once the lease runs out (by the database's
    # clock), and the job ends.
    assert wait_job(cluster, job_id, timeout_s=PAGE_LEASE_S + 60) == "succeeded"
    taken_over = page_row(cluster, held["id"])
    assert host_of(taken_over) == "pm-w2"
    assert taken_over["attempts"] == held["attempts"] + 1
    assert taken_over["started_at"] >= held["lease_expires_at"]
    assert {host_of(page) for page in pages(cluster, job_id)} == {"pm-w2"}


def test_a_host_that_comes_back_rejoins_and_its_stale_attempt_changes_nothing(
    cluster: Cluster,
) -> None:
    if "cut" not in handed_on:
        pytest.skip("the host was not cut off (the test before this one failed)")
    job_id, _ = handed_on.pop("cut")
    before = snapshot(cluster, job_id)
    back_at = db_now(cluster)
    cluster.release(W1)
    cluster.network.restore(W1)

    # Back in the registry: its heartbeats reach the database again.
    wait_for(
        lambda: bool(
            cluster.sql("SELECT 1 FROM workers WHERE host = 'pm-w1' AND heartbeat_at > %s", back_at)
        ),
        60,
        "the host's heartbeat",
    )
    # And back at work: with the other host holding a page, only it can end this job.
    cluster.hold(W2)
    try:
        rejoined = submit(cluster, "rejoined", 3)
        wait_held(cluster, W2)
        wait_for(
            lambda: sum(host_of(page) == "pm-w1" for page in pages(cluster, rejoined)) == 2,
            90,
            "the host that came back to read pages",
        )
    finally:
        cluster.release(W2)
    assert wait_job(cluster, rejoined) == "succeeded"

    # Whatever the cut-off host still had to say about the old page (its attempt was
    # stopped at the time limit while cut off) changed nothing: rows, cost, objects.
    assert snapshot(cluster, job_id) == before


def test_a_host_whose_clock_is_hours_off_keeps_to_the_database_clock(cluster: Cluster) -> None:
    skew = timedelta(hours=3)
    cluster.network.add_host(W3, "198.18.0.13")
    # Its S3 requests would be refused (S3 rejects signatures more than 15 minutes off),
    # so it consumes no queue: it runs what every worker runs, heartbeats and the reaper.
    cluster.start_worker(W3, clock_offset_s=skew.total_seconds(), queues="skewed-idle")
    cluster.wait_worker(W3)
    now = db_now(cluster)
    # The host's own clock really is three hours ahead (its log's time stamps) ...
    logged = cluster.log(W3).read_text().splitlines()
    stamp = next(line[:19] for line in logged if line[:4].isdigit())
    its_clock = datetime.fromisoformat(stamp).replace(tzinfo=now.tzinfo)
    assert abs(its_clock - now - skew) < timedelta(minutes=5)
    # ... but its registration and heartbeats carry the database's time.
    [(heartbeat,)] = cluster.sql("SELECT heartbeat_at FROM workers WHERE host = 'pm-w3'")
    assert abs(heartbeat - now) < timedelta(seconds=30)

    # Its reaper alone reaches the database while a cut-off host holds a page: it takes
    # the page over when the lease runs out by the database's clock; not before (three
    # hours ahead, every lease would look expired), and not three hours late.
    cluster.hold(W1)
    cluster.hold(W2)
    job_id = submit(cluster, "skewed", 1)
    wait_for(
        lambda: cluster.held_page(W1) or cluster.held_page(W2), 60, "a worker host to hold the page"
    )
    held = page_row(cluster, cluster.held_page(W1) or cluster.held_page(W2) or 0)
    # One of the cut-off hosts is mid-pass, holding the reaper's lock in an open
    # transaction: the database must let go of it when that host stops answering.
    cluster.start(W2, "pm-w2", [sys.executable, "-c", HOLD_REAPER_LOCK], cluster.env(W2), "lock")
    wait_for(lambda: b"reaper lock held" in cluster.log(W2).read_bytes(), 60, "the reaper lock")
    cluster.network.cut(W1)
    cluster.network.cut(W2)
    try:
        wait_for(
            lambda: page_row(cluster, held["id"])["updated_at"] != held["updated_at"],
            PAGE_LEASE_S + 45,
            "the reaper to find the page whose lease ran out",
        )
        reaped = page_row(cluster, held["id"])
        assert reaped["updated_at"] >= held["lease_expires_at"]
        assert (reaped["status"], reaped["attempts"]) == ("running", held["attempts"])
        # Published once the pass committed; so marked a moment after the row changed.
        wait_for(lambda: pending_marker(cluster, held["id"]), 10, "the page's message")
    finally:
        cluster.stop("lock")
        for host in (W1, W2):
            cluster.release(host)
            cluster.network.restore(host)
    assert wait_job(cluster, job_id) == "succeeded"
    assert page_row(cluster, held["id"])["attempts"] == held["attempts"] + 1


# A reaper pass that never ends: the lock taken as pagemill.jobs.reaper takes it.
HOLD_REAPER_LOCK = """
import time
from pagemill.db.session import session_factory
from pagemill.jobs import repository
from pagemill.jobs.reaper import REAPER_LOCK_KEY
while True:
    with session_factory().begin() as session:
        if repository.try_advisory_xact_lock(session, REAPER_LOCK_KEY):
            print("reaper lock held", flush=True)
            time.sleep(600)
    time.sleep(0.05)
"""


def pending_marker(cluster: Cluster, page_id: int) -> bool:
    """The reaper republished the page: its message is marked pending (pagemill.queue)."""
    with cluster.network.inside(SERVICES):
        client = redis.Redis.from_url(CLUSTER_SETTINGS["PAGEMILL_BROKER_URL"])
        return bool(client.exists(f"ocr-pending:{page_id}"))


def test_a_host_whose_clock_is_hours_off_cannot_store_and_says_so(cluster: Cluster) -> None:
    """S3 refuses requests signed more than 15 minutes off its own clock. That is the
    host's fault, never the page's: an outage to retry elsewhere (the page keeps its
    claim, cut short, and the reaper hands it on), not an engine failure charged to the
    page, which after three would fail it whichever host's clock was wrong."""
    settings = Settings(
        s3_endpoint=CLUSTER_SETTINGS["PAGEMILL_S3_ENDPOINT"],
        s3_access_key=CLUSTER_SETTINGS["PAGEMILL_S3_ACCESS_KEY"],
        s3_secret_key=CLUSTER_SETTINGS["PAGEMILL_S3_SECRET_KEY"],
        s3_bucket=CLUSTER_SETTINGS["PAGEMILL_S3_BUCKET"],
    )
    store = ObjectStore(settings)
    with cluster.network.inside(SERVICES):
        store.put_bytes("clock/check", b"stored on time", "text/plain")
        future = datetime.now(UTC) + timedelta(hours=3)
        with time_machine.travel(future, tick=True), pytest.raises(StorageUnavailable) as refused:
            store.get_bytes("clock/check")
        assert "RequestTimeTooSkewed" in str(refused.value)
        assert store.get_bytes("clock/check") == b"stored on time"
