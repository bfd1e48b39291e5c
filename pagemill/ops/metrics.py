"""Prometheus metrics, read at scrape time: page counts (the pages engines ran, and
apart from them the pages copied from the result cache), latency, device time, cost and
speculative-decoding acceptance from Postgres, queue depths, the age of each queue's
oldest waiting message and parked poison messages from Redis.

Queue depth and oldest-message age are the autoscaling signals (deploy/kubernetes):
each queue carries its licence class, since only licensed workers may drain a
commercial queue and scaling the others does not help it.

Nothing is counted in process memory, so the numbers are the same whichever API
process answers the scrape, and hold across every worker process and restart. A
source that cannot be read leaves its metrics out and sets `pagemill_scrape_error`
for it; the scrape itself still succeeds.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache

import redis
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from redis.backoff import NoBackoff
from redis.retry import Retry
from sqlalchemy import Engine

from pagemill.db.session import get_engine
from pagemill.dead_letter import poison_counts
from pagemill.engines.catalog import COMMERCIAL_STAGES, QUEUE_FAMILIES
from pagemill.ops.repository import LATENCY_BUCKETS_S, MetricsSnapshot, metrics_snapshot
from pagemill.queue import PUBLISHED_AT_HEADER
from pagemill.settings import get_settings

log = logging.getLogger(__name__)

# Every Celery queue a deployment may run, by stage (settings.queue(stage) names them).
QUEUE_STAGES = ("prepare", "ocr", "ocr-gpu", "ocr-gpu-commercial", "finalize", "webhooks")
# kombu's Redis transport keeps one list per queue and priority step: the queue's own
# name for priority 0, and the name with "\x06\x16" and the step for the others.
_PRIORITY_SUFFIXES = ("", "\x06\x163", "\x06\x166", "\x06\x169")
_REDIS_TIMEOUT_S = 2.0


def licence_class(stage: str) -> str:
    """Which pages a queue holds by licence: `commercial` (only workers with a commercial
    basis may consume it), `non_commercial` (a licence-gated engine's other queue) or
    `any` (engines whose models permit any use, and the stages that run no model)."""
    if stage in COMMERCIAL_STAGES:
        return "commercial"
    gated = {family.stage for family in QUEUE_FAMILIES if family.commercial_stage is not None}
    return "non_commercial" if stage in gated else "any"


def make_redis(url: str) -> redis.Redis:
    """A client for scrapes: short timeouts and no retries, so a Redis outage costs a
    scrape two seconds at most, not the client's retries with backoff."""
    return redis.Redis.from_url(
        url,
        socket_timeout=_REDIS_TIMEOUT_S,
        socket_connect_timeout=_REDIS_TIMEOUT_S,
        retry=Retry(NoBackoff(), 0),
    )


@lru_cache(maxsize=1)
def _redis() -> redis.Redis:
    return make_redis(get_settings().broker_url)


def queue_depths(client: redis.Redis, queues: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Messages waiting in each queue (stage -> count); unacknowledged and delayed
    messages are not waiting and are not counted."""
    pipeline = client.pipeline(transaction=False)
    pairs = list(queues)
    for _, queue in pairs:
        for suffix in _PRIORITY_SUFFIXES:
            pipeline.llen(queue + suffix)
    lengths = pipeline.execute()
    step = len(_PRIORITY_SUFFIXES)
    return {
        stage: sum(int(length) for length in lengths[index * step : (index + 1) * step])
        for index, (stage, _) in enumerate(pairs)
    }


def read_queue_depths() -> dict[str, tuple[str, int]]:
    """Every stage's queue name and waiting messages, as /metrics reports them."""
    settings = get_settings()
    queues = [(stage, settings.queue(stage)) for stage in QUEUE_STAGES]
    depths = queue_depths(_redis(), queues)
    return {stage: (queue, depths[stage]) for stage, queue in queues}


def oldest_message_ages(
    client: redis.Redis, queues: Iterable[tuple[str, str]], now: float | None = None
) -> dict[str, float]:
    """Seconds the oldest waiting message of each queue has waited (stage -> age), 0
    for an empty queue. Kombu pushes on the left and pops on the right, so each list's
    oldest message is its last; the age is read from the publisher's stamp
    (pagemill.queue.PUBLISHED_AT_HEADER), and a message without one counts as new."""
    pipeline = client.pipeline(transaction=False)
    pairs = list(queues)
    for _, queue in pairs:
        for suffix in _PRIORITY_SUFFIXES:
            pipeline.lindex(queue + suffix, -1)
    tails = pipeline.execute()
    now = time.time() if now is None else now
    step = len(_PRIORITY_SUFFIXES)
    ages: dict[str, float] = {}
    for index, (stage, _) in enumerate(pairs):
        stamps = [_published_at(raw) for raw in tails[index * step : (index + 1) * step]]
        # Clocks of different hosts disagree a little: an age is never below zero.
        ages[stage] = max([0.0, *(now - stamp for stamp in stamps if stamp is not None)])
    return ages


def _published_at(raw: bytes | None) -> float | None:
    if raw is None:
        return None
    try:
        stamp = json.loads(raw)["headers"][PUBLISHED_AT_HEADER]
    except (ValueError, TypeError, KeyError):
        return None  # garbage is parked by the workers and counted as poison, not aged
    return float(stamp) if isinstance(stamp, int | float) else None


class PagemillCollector(Collector):
    def __init__(
        self,
        engine: Callable[[], Engine] = get_engine,
        redis_client: Callable[[], redis.Redis] = _redis,
    ) -> None:
        self._engine = engine
        self._redis_client = redis_client

    def describe(self) -> Iterable[Metric]:
        # Nothing up front: registering must not query the database.
        return []

    def collect(self) -> Iterator[Metric]:
        errors = {"postgres": 0.0, "redis": 0.0}
        try:
            snapshot = metrics_snapshot(self._engine())
        except Exception:
            log.warning("metrics: could not read Postgres", exc_info=True)
            errors["postgres"] = 1.0
        else:
            yield from _page_metrics(snapshot)

        settings = get_settings()
        queues = [(stage, settings.queue(stage)) for stage in QUEUE_STAGES]
        try:
            client = self._redis_client()
            depths = queue_depths(client, queues)
            ages = oldest_message_ages(client, queues)
            parked = poison_counts(client, settings)
        except Exception:
            log.warning("metrics: could not read Redis", exc_info=True)
            errors["redis"] = 1.0
        else:
            yield from _queue_metrics(queues, depths, ages)
            yield _poison_metric(parked)

        error = GaugeMetricFamily(
            "pagemill_scrape_error",
            "1 when this scrape could not read the source; its metrics are left out.",
            labels=["source"],
        )
        for source, value in errors.items():
            error.add_metric([source], value)
        yield error


def _queue_metrics(
    queues: list[tuple[str, str]], depths: dict[str, int], ages: dict[str, float]
) -> Iterator[Metric]:
    labels = ["queue", "stage", "licence"]
    depth = GaugeMetricFamily(
        "pagemill_queue_depth", "Messages waiting in each Celery queue.", labels=labels
    )
    age = GaugeMetricFamily(
        "pagemill_queue_oldest_message_age_seconds",
        "How long the oldest message waiting in each Celery queue has waited; 0 when empty.",
        labels=labels,
    )
    for stage, queue in queues:
        depth.add_metric([queue, stage, licence_class(stage)], depths[stage])
        age.add_metric([queue, stage, licence_class(stage)], ages[stage])
    yield depth
    yield age


def _poison_metric(parked: dict[tuple[str, str], int]) -> Metric:
    poison = CounterMetricFamily(
        "pagemill_poison_messages",
        "Messages taken off a queue unrun because they were not a task message we send; "
        "kept on the dead-letter list.",
        labels=["queue", "reason"],
    )
    for (queue, reason), count in sorted(parked.items()):
        poison.add_metric([queue, reason], count)
    return poison


def _page_metrics(snapshot: MetricsSnapshot) -> Iterator[Metric]:
    pages = CounterMetricFamily(
        "pagemill_pages_processed",
        "Pages that ended, by the engine that ran them and how they ended; result-cache "
        "hits are in pagemill_pages_cached_total instead.",
        labels=["engine", "status"],
    )
    for (engine, status), count in sorted(snapshot.pages.items()):
        pages.add_metric([engine, status], count)
    yield pages

    cached = CounterMetricFamily(
        "pagemill_pages_cached",
        "Pages served from the result cache (copied from an earlier job; no engine ran), "
        "by the engine that read the original.",
        labels=["engine"],
    )
    for engine, count in sorted(snapshot.cached_pages.items()):
        cached.add_metric([engine], count)
    yield cached

    latency = HistogramMetricFamily(
        "pagemill_page_latency_seconds",
        "Wall time of each page that ran (succeeded or failed), by engine.",
        labels=["engine"],
    )
    bounds = [floatToGoString(bound) for bound in LATENCY_BUCKETS_S]
    for histogram in sorted(snapshot.latency, key=lambda found: found.engine):
        buckets = [
            *zip(bounds, histogram.bucket_counts, strict=True),
            ("+Inf", histogram.count),
        ]
        latency.add_metric([histogram.engine], buckets, histogram.sum_seconds)
    yield latency

    device_seconds = CounterMetricFamily(
        "pagemill_device_seconds",
        "Device seconds attributed to pages, by engine and device kind.",
        labels=["engine", "device_kind"],
    )
    cost = CounterMetricFamily(
        "pagemill_cost_usd",
        "Cost of pages in US dollars (device seconds x price per hour / 3600).",
        labels=["engine", "device_kind"],
    )
    for key in sorted(snapshot.device_seconds):
        device_seconds.add_metric(list(key), snapshot.device_seconds[key])
        cost.add_metric(list(key), snapshot.cost_usd[key])
    yield device_seconds
    yield cost

    draft = CounterMetricFamily(
        "pagemill_spec_draft_tokens",
        "Tokens proposed by speculative decoding, by model.",
        labels=["model"],
    )
    accepted = CounterMetricFamily(
        "pagemill_spec_accepted_tokens",
        "Proposed tokens that the model accepted, by model.",
        labels=["model"],
    )
    rate = GaugeMetricFamily(
        "pagemill_spec_acceptance_rate",
        "Accepted over proposed tokens of speculative decoding, over all pages, by model.",
        labels=["model"],
    )
    for model, (draft_tokens, accepted_tokens) in sorted(snapshot.speculation.items()):
        draft.add_metric([model], draft_tokens)
        accepted.add_metric([model], accepted_tokens)
        if draft_tokens > 0:
            rate.add_metric([model], accepted_tokens / draft_tokens)
    yield draft
    yield accepted
    yield rate


@lru_cache(maxsize=1)
def metrics_registry() -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PagemillCollector())
    return registry


def render_metrics() -> tuple[bytes, str]:
    """The Prometheus text exposition and its content type."""
    return generate_latest(metrics_registry()), CONTENT_TYPE_LATEST
