"""A cap on one client's delivery attempts in flight, counted in Redis across every
webhook worker, so one client's slow endpoints cannot hold every webhook thread.

Each attempt holds a slot: a member of the client's sorted set, scored with when it
expires (the attempt lease). An attempt releases its slot when it ends; a worker that
dies mid-attempt leaves a slot that expires with the lease, which the attempt has by
then outlived anyway. A delivery whose client has every slot taken is not claimed:
its message is published again a little later.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from pagemill.settings import Settings

log = logging.getLogger(__name__)

# Atomic: drop expired slots, then take one if fewer than the cap are held. Time comes
# from Redis, so the workers' clocks need not agree.
_ACQUIRE = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
    return 0
end
redis.call('ZADD', KEYS[1], now_ms + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1
"""
_REDIS_TIMEOUT_S = 2.0


class ClientSlots:
    def __init__(self, client: redis.Redis, key_prefix: str, per_client: int, hold_s: float):
        self._redis = client
        self._key_prefix = key_prefix
        self._per_client = per_client
        self._hold_ms = max(1, round(hold_s * 1000))
        self._acquire = client.register_script(_ACQUIRE)

    def _key(self, client_id: uuid.UUID) -> str:
        return f"{self._key_prefix}{client_id}"

    @contextmanager
    def held(self, client_id: uuid.UUID) -> Iterator[bool]:
        """True while holding one of the client's slots; False when all are taken.
        If Redis cannot be reached the attempt goes ahead uncapped: an outage must
        not stop deliveries (and the broker is Redis, so it is brief or total)."""
        token = uuid.uuid4().hex
        key = self._key(client_id)
        try:
            taken: bool | None = bool(
                self._acquire(keys=[key], args=[token, self._per_client, self._hold_ms])
            )
        except redis.RedisError as error:
            log.warning("webhook slots unavailable, attempt not capped: %s", error)
            taken = None
        if not taken:
            yield taken is None
            return
        try:
            yield True
        finally:
            try:
                self._redis.zrem(key, token)
            except redis.RedisError as error:
                log.warning("webhook slot of %s left to expire: %s", client_id, error)


def retry_when_full_s(settings: Settings, rng: random.Random | None = None) -> float:
    """When to look again for a slot: some slot frees within one attempt deadline, most
    much sooner; jitter keeps a client's waiting deliveries from returning in step."""
    base = min(settings.webhook_attempt_deadline_s / 4, 5.0)
    return base * (rng or random).uniform(0.5, 1.5)


@lru_cache(maxsize=4)
def client_slots(broker_url: str, key_prefix: str, per_client: int, hold_s: float) -> ClientSlots:
    # No retries: when Redis is away the attempt goes ahead uncapped at once.
    client = redis.Redis.from_url(
        broker_url,
        socket_timeout=_REDIS_TIMEOUT_S,
        socket_connect_timeout=_REDIS_TIMEOUT_S,
        retry=Retry(NoBackoff(), 0),
    )
    return ClientSlots(client, key_prefix, per_client, hold_s)


def slots_for(settings: Settings) -> ClientSlots:
    return client_slots(
        settings.broker_url,
        settings.queue("webhook-slots:"),
        settings.webhook_client_concurrency,
        settings.webhook_attempt_lease_s,
    )
