"""The Celery-to-engine bridge under a real Celery worker (threads pool) and
the real Redis, with a scripted AsyncLLM double in place of vLLM.

What must hold for a GPU worker to be worth its price: with a backlog, the
engine's batch stays full; a page that fails or hangs is retried while the
others go on; a shutdown drains its pages or puts them back on the queue.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery
from conftest import REDIS_URL, CeleryHarness, WorkerProcess
from gpu_doubles import MAX_NUM_SEQS, PAGE_TIMEOUT_S

from worker.bridge import summarise_samples

# Generous limits: on a loaded two-core machine a worker's first vLLM import
# alone can take a minute. The assertions are about what happens, not how fast.
pytestmark = pytest.mark.timeout(900)
WAIT_S = 240

BACKLOG = 200
FAILING = {17, 63}
HANGING = {41, 120}


def enqueue(queue: str, pages: range) -> None:
    client = Celery(broker=REDIS_URL)
    for page in pages:
        client.send_task("gpu_test.convert_page", args=[page], queue=queue)
    client.close()


def done_records(store: Any, run: str) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in store.lrange(f"{run}:done", 0, -1)]


def events(store: Any, run: str) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in store.lrange(f"{run}:events", 0, -1)]


def wait_until(condition: Any, timeout_s: float, what: str, worker: WorkerProcess) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}:\n{worker.output()[-3000:]}")
        time.sleep(0.05)


def drain_report(store: Any, run: str, pid: int) -> dict[str, Any]:
    reports = [e for e in events(store, run) if e.get("pid") == pid and "drained" in e]
    assert len(reports) == 1, events(store, run)
    return reports[0]


@pytest.fixture(scope="module")
def backlog_run(
    redis_store: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """200 pages through one worker; then SIGTERM it and collect its gauges."""
    harness = CeleryHarness(redis_store, tmp_path_factory.mktemp("backlog"))
    try:
        enqueue(harness.queue, range(1, BACKLOG + 1))
        worker = harness.start_worker(script="backlog", concurrency=40)
        wait_until(
            lambda: len({r["page"] for r in done_records(redis_store, harness.run)}) == BACKLOG,
            WAIT_S,
            "the backlog to finish",
            worker,
        )
        worker.terminate()
        assert worker.wait(timeout_s=WAIT_S) == 0, worker.output()[-3000:]
        yield {
            "done": done_records(redis_store, harness.run),
            "report": drain_report(redis_store, harness.run, worker.process.pid),
        }
    finally:
        harness.close()


def test_backlog_keeps_the_batch_full(backlog_run: dict[str, Any]) -> None:
    done = sorted(r["done_at"] for r in backlog_run["done"])
    # One sample per engine step: the batch the decoder actually ran.
    steps = [(at, value) for at, value in backlog_run["report"]["gauge"]]
    warm = next(at for at, value in steps if value == MAX_NUM_SEQS)
    # Until the last 32 pages, at least 32 pages remain: the batch can be full.
    backlog_ends = done[BACKLOG - MAX_NUM_SEQS - 1]
    window = summarise_samples(steps, warm, backlog_ends)
    batch_sizes = [value for at, value in steps if warm <= at <= backlog_ends]
    print(
        f"batch after warm-up, {len(batch_sizes)} steps over {backlog_ends - warm:.2f} s: "
        f"min {window.minimum}, max {window.maximum}, time-weighted mean {window.mean:.2f}"
    )
    assert window.maximum == MAX_NUM_SEQS
    assert window.minimum >= 30
    assert window.mean >= 31.0


def test_failed_and_hung_pages_are_retried_while_others_go_on(backlog_run: dict[str, Any]) -> None:
    done = backlog_run["done"]
    pages = [r["page"] for r in done]
    assert sorted(pages) == list(range(1, BACKLOG + 1)), "every page exactly once"
    retried = {r["page"] for r in done if r["retries"] > 0}
    assert retried == FAILING | HANGING
    assert all(r["retries"] == 1 for r in done if r["page"] in retried)
    # A hung page holds one slot for the page timeout; the rest keep finishing.
    first_done = min(r["done_at"] for r in done)
    hang_window = [r for r in done if first_done < r["done_at"] < first_done + PAGE_TIMEOUT_S]
    assert len(hang_window) >= 20
    assert backlog_run["report"]["engine_shut_down"]


def test_backlog_charges_add_up_to_busy_time(backlog_run: dict[str, Any]) -> None:
    report = backlog_run["report"]
    pages_ns = sum(r["gpu_ns"] for r in backlog_run["done"])
    # Failed and timed-out attempts were charged too, to nobody in particular.
    assert report["abandoned_ns"] > 0
    assert pages_ns + report["abandoned_ns"] == report["charged_ns"] == report["busy_ns"]
    assert all(r["settled"] for r in backlog_run["done"])


def test_shutdown_drains_pages_in_flight(redis_store: Any, celery_harness: CeleryHarness) -> None:
    run = celery_harness.run
    enqueue(celery_harness.queue, range(1, 61))
    first = celery_harness.start_worker(script="long", concurrency=40, drain_s=30)
    wait_until(
        lambda: int(redis_store.get(f"{run}:admitted") or 0) >= MAX_NUM_SEQS,
        WAIT_S,
        "a full batch",
        first,
    )
    time.sleep(0.5)
    first.terminate()
    assert first.wait(timeout_s=WAIT_S) == 0, first.output()[-3000:]
    report = drain_report(redis_store, run, first.process.pid)
    by_first = [r for r in done_records(redis_store, run) if r["pid"] == first.process.pid]
    # Pages of 1.5 s and more, SIGTERM half a second into the first batch: every
    # page on the first worker was still in flight and had to be drained.
    assert report["cancelled"] == 0
    assert report["drained"] >= MAX_NUM_SEQS
    assert len(by_first) == report["drained"], "every page in flight finished there"

    second = celery_harness.start_worker(script="long", concurrency=40, drain_s=30)
    wait_until(
        lambda: len(done_records(redis_store, run)) >= 60, WAIT_S, "the rest of the queue", second
    )
    second.terminate()
    assert second.wait(timeout_s=WAIT_S) == 0
    pages = sorted(r["page"] for r in done_records(redis_store, run))
    assert pages == list(range(1, 61)), "every page exactly once"


def test_shutdown_requeues_pages_it_cannot_drain(
    redis_store: Any, celery_harness: CeleryHarness
) -> None:
    run = celery_harness.run
    enqueue(celery_harness.queue, range(1, 61))
    first = celery_harness.start_worker(script="long", concurrency=40, drain_s=0.3)
    wait_until(
        lambda: int(redis_store.get(f"{run}:admitted") or 0) >= MAX_NUM_SEQS,
        WAIT_S,
        "a full batch",
        first,
    )
    first.terminate()
    assert first.wait(timeout_s=WAIT_S) == 0, first.output()[-3000:]
    report = drain_report(redis_store, run, first.process.pid)
    finished_first = {r["page"] for r in done_records(redis_store, run)}
    # Pages of 1.5 s and more, a 0.3 s drain: the worker left without them.
    assert report["cancelled"] == 40 - len(finished_first)
    assert report["cancelled"] > 0
    assert report["drain_seconds"] < 5
    assert report["engine_shut_down"]

    second = celery_harness.start_worker(script="long", concurrency=40, drain_s=30)
    wait_until(
        lambda: len(done_records(redis_store, run)) >= 60, WAIT_S, "the re-queued pages", second
    )
    time.sleep(0.5)  # a duplicate would show up here
    second.terminate()
    assert second.wait(timeout_s=WAIT_S) == 0
    pages = sorted(r["page"] for r in done_records(redis_store, run))
    assert pages == list(range(1, 61)), (
        "every page exactly once, the cancelled ones on the second worker"
    )
