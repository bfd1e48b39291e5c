"""Per-client request rate limit, shared by every API process through Redis."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from functools import lru_cache

from limits import parse
from limits.storage import RedisStorage
from limits.strategies import MovingWindowRateLimiter

from pagemill.settings import get_settings

log = logging.getLogger(__name__)


class ClientRateLimiter:
    def __init__(self, redis_url: str, rate: str, namespace: str) -> None:
        self.item = parse(rate)
        self.namespace = namespace
        self.limiter = MovingWindowRateLimiter(RedisStorage(redis_url))

    def retry_after_s(self, client_id: uuid.UUID) -> int | None:
        """None when the request may go ahead; else seconds until it may."""
        try:
            if self.limiter.hit(self.item, self.namespace, str(client_id)):
                return None
            reset_at = self.limiter.get_window_stats(
                self.item, self.namespace, str(client_id)
            ).reset_time
        except Exception:
            # Fail open: a Redis hiccup must not turn every caller away.
            log.warning("rate limiter unavailable; request allowed", exc_info=True)
            return None
        return max(1, int(reset_at - time.time()) + 1)


_lock = threading.Lock()


@lru_cache(maxsize=1)
def _build() -> ClientRateLimiter:
    settings = get_settings()
    return ClientRateLimiter(
        settings.broker_url, settings.rate_limit, f"{settings.queue_prefix}ratelimit"
    )


def get_rate_limiter() -> ClientRateLimiter:
    # Built once, under a lock: the limits library's dependency check is not safe to
    # run from many request threads at once.
    with _lock:
        return _build()
