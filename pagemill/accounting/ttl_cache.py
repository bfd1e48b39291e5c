"""A value per key, kept in this process for a short while.

The quote fits each engine's cost model over its last few hundred priced pages
(pagemill.accounting.quote). Read and fitted at every submit, that is a query of up to
500 rows and a least-squares fit per engine per upload; the history moves by a few pages
a second at most, so a model a few seconds old prices a page as well as a fresh one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

Value = TypeVar("Value")


class TtlCache(Generic[Value]):
    """`get` loads a key's value once and hands it out until `ttl_s` has passed since it
    was loaded. A ttl of zero or less keeps nothing. Two threads missing the same key at
    once may both load it; the later one is kept (a load has no side effects)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._entries: dict[Hashable, tuple[float, Value]] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, ttl_s: float, load: Callable[[], Value]) -> Value:
        if ttl_s <= 0:
            return load()
        now = self.clock()
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None and entry[0] > now:
            return entry[1]
        value = load()
        with self._lock:
            self._drop_expired(now)
            self._entries[key] = (now + ttl_s, value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def _drop_expired(self, now: float) -> None:
        # Keys are few (engines times price settings); sweeping keeps settings that
        # changed from holding their models for the life of the process.
        for key in [key for key, (expires_at, _) in self._entries.items() if expires_at <= now]:
            del self._entries[key]
