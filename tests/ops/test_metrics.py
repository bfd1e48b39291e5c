"""GET /metrics: Prometheus text read from Postgres and Redis at scrape time."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import psycopg
import pytest
import redis
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine

from pagemill.ops.metrics import QUEUE_STAGES, PagemillCollector, make_redis
from pagemill.queue import OCR_TASK, PUBLISHED_AT_HEADER, make_celery
from pagemill.settings import Settings
from tests.conftest import TEST_ENV, make_client_key
from tests.ops.conftest import OPS_API_NAME, OPS_QUEUE_PREFIX, OpsWorld

approx = pytest.approx

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def test_metrics_count_what_the_database_and_queues_hold(
    ops_world: OpsWorld, ops_api_url: str, redis_client: redis.Redis
) -> None:
    queues = {stage: f"{OPS_QUEUE_PREFIX}{stage}" for stage in QUEUE_STAGES}
    for stage in QUEUE_STAGES:
        redis_client.delete(queues[stage], queues[stage] + "\x06\x163")
    redis_client.rpush(queues["ocr"], "a", "b", "c")
    redis_client.rpush(queues["webhooks"], "d")
    redis_client.rpush(queues["webhooks"] + "\x06\x163", "e")  # a priority list of kombu's

    response = httpx.get(f"{ops_api_url}/metrics", timeout=30)  # no key: Prometheus scrapes
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples = parse(response.text)

    assert value(samples, "pagemill_scrape_error", source="postgres") == 0
    assert value(samples, "pagemill_scrape_error", source="redis") == 0

    processed = "pagemill_pages_processed_total"
    assert {labels: count for (name, labels), count in samples.items() if name == processed} == {
        frozenset({("engine", "rapidocr"), ("status", "succeeded")}): 3,
        frozenset({("engine", "rapidocr"), ("status", "failed")}): 1,
        frozenset({("engine", "vllm"), ("status", "succeeded")}): 4,
        frozenset({("engine", "none"), ("status", "cancelled")}): 1,
    }

    # Wall seconds: rapidocr 2, 3, 4 and the failed 1.5; vllm 1.2, 0.9, 0.6, 0.8.
    bucket = "pagemill_page_latency_seconds_bucket"
    assert value(samples, bucket, engine="rapidocr", le="1.0") == 0
    assert value(samples, bucket, engine="rapidocr", le="2.5") == 2
    assert value(samples, bucket, engine="rapidocr", le="5.0") == 4
    assert value(samples, bucket, engine="rapidocr", le="+Inf") == 4
    assert value(samples, "pagemill_page_latency_seconds_count", engine="rapidocr") == 4
    assert value(samples, "pagemill_page_latency_seconds_sum", engine="rapidocr") == approx(10.5)
    assert value(samples, bucket, engine="vllm", le="0.5") == 0
    assert value(samples, bucket, engine="vllm", le="1.0") == 3
    assert value(samples, bucket, engine="vllm", le="2.5") == 4
    assert value(samples, "pagemill_page_latency_seconds_count", engine="vllm") == 4
    assert value(samples, "pagemill_page_latency_seconds_sum", engine="vllm") == approx(3.5)

    # Failed pages used their device too; the running page has no measurement yet.
    device, cost = "pagemill_device_seconds_total", "pagemill_cost_usd_total"
    cpu = {"engine": "rapidocr", "device_kind": "cpu"}
    l4 = {"engine": "vllm", "device_kind": "nvidia-l4"}
    a100 = {"engine": "vllm", "device_kind": "nvidia-a100-40gb"}
    assert value(samples, device, **cpu) == approx(10.0)
    assert value(samples, device, **l4) == approx(0.75)
    assert value(samples, device, **a100) == approx(0.5)
    assert value(samples, cost, **cpu) == approx(0.001)
    assert value(samples, cost, **l4) == approx(0.00015)
    assert value(samples, cost, **a100) == approx(0.0002)

    # 300 + 100 + 80 + 270 accepted of 400 + 200 + 100 + 300 proposed
    jina = {"model": "jina-ocr-v1"}
    assert value(samples, "pagemill_spec_draft_tokens_total", **jina) == 1000
    assert value(samples, "pagemill_spec_accepted_tokens_total", **jina) == 750
    assert value(samples, "pagemill_spec_acceptance_rate", **jina) == approx(0.75)

    depth = "pagemill_queue_depth"
    depths = {
        stage: value(samples, depth, queue=queues[stage], stage=stage, licence=LICENCES[stage])
        for stage in queues
    }
    assert depths == {
        "prepare": 0,
        "ocr": 3,
        "ocr-gpu": 0,
        "ocr-gpu-commercial": 0,
        "finalize": 0,
        "webhooks": 2,
    }


# Only licensed workers may drain the commercial queue: an autoscaler must tell them apart.
LICENCES = {
    "prepare": "any",
    "ocr": "any",
    "ocr-gpu": "non_commercial",
    "ocr-gpu-commercial": "commercial",
    "finalize": "any",
    "webhooks": "any",
}


def test_metrics_give_each_queue_the_age_of_its_oldest_message(
    ops_world: OpsWorld, ops_api_url: str, redis_client: redis.Redis
) -> None:
    queues = {stage: f"{OPS_QUEUE_PREFIX}{stage}" for stage in QUEUE_STAGES}
    for stage in QUEUE_STAGES:
        redis_client.delete(*(queues[stage] + suffix for suffix in ("", "\x06\x163")))
    # Published as the workers' messages are (kombu pushes on the left, pops on the right).
    publisher = make_celery(Settings(queue_prefix=OPS_QUEUE_PREFIX))
    publisher.send_task(OCR_TASK, args=[1], queue=queues["ocr"])
    publisher.send_task(OCR_TASK, args=[2], queue=queues["ocr-gpu-commercial"])
    # The same message as if published two minutes ago, at the oldest end of the queue.
    raw = redis_client.lindex(queues["ocr"], 0)
    assert isinstance(raw, bytes)
    old = json.loads(raw)
    assert isinstance(old["headers"][PUBLISHED_AT_HEADER], float)
    old["headers"][PUBLISHED_AT_HEADER] -= 120
    redis_client.rpush(queues["ocr"], json.dumps(old))
    redis_client.rpush(queues["webhooks"], "not a message at all")

    samples = parse(httpx.get(f"{ops_api_url}/metrics", timeout=30).text)

    age = "pagemill_queue_oldest_message_age_seconds"
    ages = {
        stage: value(samples, age, queue=queues[stage], stage=stage, licence=LICENCES[stage])
        for stage in queues
    }
    assert 120 <= ages["ocr"] < 240
    assert 0 <= ages["ocr-gpu-commercial"] < 60
    # Empty queues, and a queue holding only garbage (parked by the workers, not aged).
    assert ages["prepare"] == ages["ocr-gpu"] == ages["finalize"] == ages["webhooks"] == 0
    depth = "pagemill_queue_depth"
    assert value(samples, depth, queue=queues["ocr"], stage="ocr", licence="any") == 2
    assert value(samples, depth, queue=queues["webhooks"], stage="webhooks", licence="any") == 1


def test_an_unreadable_source_is_reported_not_raised(ops_world: OpsWorld) -> None:
    dead_postgres = create_engine("postgresql+psycopg://postgres@127.0.0.1:1/none")
    dead_redis = make_redis("redis://127.0.0.1:1/0")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PagemillCollector(lambda: dead_postgres, lambda: dead_redis))
    samples = parse(generate_latest(registry).decode())
    assert value(samples, "pagemill_scrape_error", source="postgres") == 1
    assert value(samples, "pagemill_scrape_error", source="redis") == 1
    assert not [name for name, _ in samples if name != "pagemill_scrape_error"]

    # Each source alone: what can be read still is.
    working = CollectorRegistry(auto_describe=False)
    working.register(PagemillCollector(redis_client=lambda: dead_redis))
    samples = parse(generate_latest(working).decode())
    assert value(samples, "pagemill_scrape_error", source="postgres") == 0
    assert value(samples, "pagemill_scrape_error", source="redis") == 1
    assert value(samples, "pagemill_spec_acceptance_rate", model="jina-ocr-v1") == approx(0.75)
    assert not [name for name, _ in samples if name == "pagemill_queue_depth"]


# More scrapes at once than the API's database pool holds connections (10, and 10 more
# in overflow).
FLOOD_SCRAPES = 30


def test_a_flood_of_scrapes_reads_once_and_leaves_the_database_to_clients(
    ops_api_url: str,
) -> None:
    """/metrics takes no key, so anyone can send many scrapes at once. Each read waits
    here behind a lock on the pages table; once one read per scrape, they held every
    connection of the API's pool, and a client's own request waited on the pool."""
    key = make_client_key()
    url = TEST_ENV["PAGEMILL_DATABASE_URL"].replace("+psycopg", "")
    with (
        psycopg.connect(url) as holder,
        psycopg.connect(url, autocommit=True) as watcher,
        ThreadPoolExecutor(FLOOD_SCRAPES) as scrapers,
    ):
        holder.execute("LOCK TABLE pages IN ACCESS EXCLUSIVE MODE")
        scrapes = [
            scrapers.submit(httpx.get, f"{ops_api_url}/metrics", timeout=60)
            for _ in range(FLOOD_SCRAPES)
        ]
        waiting = _sessions_waiting_on_a_lock(watcher, at_least=1)
        # Every scrape has been sent: were each one reading, more would wait by now.
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline and waiting == 1:
            waiting = _sessions_waiting_on_a_lock(watcher, at_least=1)
        assert waiting == 1
        with httpx.Client(
            base_url=ops_api_url, headers={"Authorization": f"Bearer {key}"}
        ) as client:
            # Inside the scrape's statement timeout (5 s), which would free the pool.
            answer = client.get("/v1/jobs", timeout=2)
        assert answer.status_code == 200, answer.text
        holder.rollback()  # the read goes on, and every scrape gets its answer
        answers = [scrape.result() for scrape in scrapes]
    for scraped in answers:
        assert scraped.status_code == 200
        assert value(parse(scraped.text), "pagemill_scrape_error", source="postgres") == 0


def _sessions_waiting_on_a_lock(watcher: psycopg.Connection[Any], at_least: int) -> int:
    """How many of the ops API's sessions wait on a lock, once at least `at_least` do
    (or after 10 s). Only the API's: a reaper of the test session's workers, on the same
    database, waits on the pages table too."""
    deadline = time.monotonic() + 10
    while True:
        [(count,)] = watcher.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = %s AND wait_event_type = 'Lock'",
            (OPS_API_NAME,),
        ).fetchall()
        if count >= at_least or time.monotonic() > deadline:
            return int(count)
        time.sleep(0.05)
