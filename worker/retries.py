"""How long a task waits before its next try through an outage of storage, database or
broker: 2 s doubling to 60 s. With PAGEMILL_OUTAGE_RETRIES (10) that rides out about
six minutes before the reaper takes over."""

from __future__ import annotations

OUTAGE_BACKOFF_MAX_S = 60


def outage_backoff_s(retries: int) -> int:
    """The countdown before retry number `retries + 1`."""
    return min(OUTAGE_BACKOFF_MAX_S, 2 ** (retries + 1))
