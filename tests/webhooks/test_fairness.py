"""The per-client cap on attempts in flight, on the real Redis, and the settings that
keep an attempt inside its lease."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
import redis

from pagemill.settings import Settings
from pagemill.webhooks.fairness import ClientSlots, client_slots, retry_when_full_s
from tests.conftest import TEST_ENV


@pytest.fixture()
def slots(redis_client: redis.Redis) -> Iterator[ClientSlots]:
    prefix = f"{TEST_ENV['PAGEMILL_QUEUE_PREFIX']}slots-{uuid.uuid4().hex[:8]}:"
    yield ClientSlots(redis_client, prefix, per_client=2, hold_s=1.5)
    for key in redis_client.scan_iter(f"{prefix}*"):
        redis_client.delete(key)


def test_a_client_holds_at_most_its_cap_and_others_are_unaffected(slots: ClientSlots) -> None:
    busy, other = uuid.uuid4(), uuid.uuid4()
    with ExitStack() as stack:
        assert stack.enter_context(slots.held(busy))
        assert stack.enter_context(slots.held(busy))
        with slots.held(busy) as third:
            assert not third
        with slots.held(other) as others:
            assert others
    # Released when the attempts end.
    with slots.held(busy) as again, slots.held(busy) as and_again:
        assert again and and_again


def test_a_slot_left_by_a_dead_worker_expires_with_the_lease(slots: ClientSlots) -> None:
    client = uuid.uuid4()
    held = [slots.held(client), slots.held(client)]
    assert all(slot.__enter__() for slot in held)  # never exited: the worker died
    with slots.held(client) as taken:
        assert not taken
    time.sleep(1.7)
    with slots.held(client) as taken:
        assert taken


def test_an_unreachable_redis_does_not_stop_deliveries() -> None:
    started = time.monotonic()
    gone = client_slots("redis://127.0.0.1:1/0", "x:", 1, 10.0)
    with gone.held(uuid.uuid4()) as taken:
        assert taken
    assert time.monotonic() - started < 5  # no retries with backoff first


def test_a_full_client_looks_again_within_the_deadline() -> None:
    settings = Settings(webhook_attempt_deadline_s=8, webhook_attempt_lease_s=20)
    waits = [retry_when_full_s(settings) for _ in range(200)]
    assert min(waits) >= 1 and max(waits) <= 3


def test_an_attempt_deadline_that_could_outlive_its_lease_is_refused() -> None:
    with pytest.raises(ValueError, match="ATTEMPT_LEASE_S must exceed"):
        Settings(webhook_attempt_deadline_s=30, webhook_attempt_lease_s=35)
    with pytest.raises(ValueError, match="TIMEOUT_S must be above 0 and at most"):
        Settings(webhook_timeout_s=40, webhook_attempt_deadline_s=30, webhook_attempt_lease_s=120)
    with pytest.raises(ValueError, match="CLIENT_CONCURRENCY"):
        Settings(webhook_client_concurrency=0)
    assert Settings(webhook_attempt_deadline_s=30, webhook_attempt_lease_s=40)
