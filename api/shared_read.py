"""One read at a time in each API process, shared by the requests that arrive while it
runs: for /metrics, which takes no key.

A scrape aggregates the pages table and Redis's queues, holding a database connection
and a request thread while it does. Read once for each request, a flood of scrapes
(anyone can send one) took every connection of the API's pool from the clients' own
requests, which then waited on the pool until a scrape's statement timed out. Shared,
any number of scrapes holds one connection and one thread. A request that joins a read
under way gets numbers as old as that read's start, which for a counter Prometheus
samples every few seconds is no loss.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

from anyio import to_thread

T = TypeVar("T")


class SharedRead(Generic[T]):
    def __init__(self, read: Callable[[], T]) -> None:
        self._read = read
        self._running: asyncio.Future[T] | None = None

    async def __call__(self) -> T:
        running = self._running
        # A read started on another event loop (a test client's, since closed) is not
        # this loop's to wait for.
        if running is None or running.get_loop() is not asyncio.get_running_loop():
            running = asyncio.ensure_future(to_thread.run_sync(self._read))
            running.add_done_callback(self._finished)
            self._running = running
        # Shielded: a scraper that hangs up does not stop the read the others wait for.
        return await asyncio.shield(running)

    def _finished(self, done: asyncio.Future[T]) -> None:
        if self._running is done:
            self._running = None
