"""The bridge between Celery's worker threads and one asyncio engine.

An async engine (vLLM's AsyncLLM) batches continuously only if many requests
are in flight at once, and it must be driven from one event loop. Celery's
threads pool gives us many blocking threads instead. The bridge owns one
event-loop thread; each Celery thread submits its page as a coroutine and
blocks until that page's answer comes back. N threads blocked = N pages in
flight, which is exactly what the engine needs to fill its batch.

Failure modes it handles:

* A page that takes longer than `timeout_s` is cancelled on the loop (the
  engine aborts the request and frees its slot) and the caller gets
  `BridgeTimeout`, so the task can retry that page while the others go on.
* On worker shutdown, `shutdown()` stops new submissions, waits up to
  `drain_timeout_s` for pages in flight, then cancels the rest; their callers
  get `BridgeClosed` so the task can put them back on the queue.

The engines know nothing of Celery; the task is the only place that decides
to retry or re-queue.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

GAUGE_SAMPLES = 100_000  # about an hour of changes at 30 pages/s; oldest dropped


class BridgeError(Exception):
    """The page did not get an answer; safe to retry on this or another worker."""


class BridgeTimeout(BridgeError, TimeoutError):
    """The page took longer than its timeout and was cancelled."""


class BridgeClosed(BridgeError):
    """The bridge is shutting down: the page was refused or cancelled."""


@dataclass(frozen=True)
class GaugeWindow:
    """Time-weighted view of how many pages were in flight over a window."""

    start_s: float
    end_s: float
    minimum: int
    maximum: int
    mean: float


class InFlightGauge:
    """How many pages are in flight, recorded at every change. Thread-safe."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._value = 0
        self._samples: deque[tuple[float, int]] = deque(maxlen=GAUGE_SAMPLES)
        self._samples.append((clock(), 0))

    @property
    def value(self) -> int:
        return self._value

    def add(self, delta: int) -> int:
        with self._lock:
            self._value += delta
            self._samples.append((self._clock(), self._value))
            return self._value

    def samples(self) -> list[tuple[float, int]]:
        with self._lock:
            return list(self._samples)

    def window(self, start_s: float, end_s: float) -> GaugeWindow:
        """Min, max and time-weighted mean of the gauge over [start_s, end_s]."""
        samples = self.samples()
        return summarise_samples(samples, start_s, end_s)


def summarise_samples(
    samples: list[tuple[float, int]], start_s: float, end_s: float
) -> GaugeWindow:
    """Min, max and time-weighted mean of a step function over [start_s, end_s].

    `samples` are (time, value) at each change, in time order; the value holds
    until the next sample.
    """
    if end_s <= start_s:
        raise ValueError("empty window")
    current = 0
    for at, value in samples:
        if at > start_s:
            break
        current = value
    area = 0.0
    cursor = start_s
    seen = [current]
    for at, value in samples:
        if at <= start_s:
            continue
        if at >= end_s:
            break
        area += current * (at - cursor)
        cursor, current = at, value
        seen.append(value)
    area += current * (end_s - cursor)
    return GaugeWindow(start_s, end_s, min(seen), max(seen), area / (end_s - start_s))


@dataclass(frozen=True)
class ShutdownReport:
    drained: int  # pages that left during the drain (finished, failed or timed out)
    cancelled: int  # pages cancelled after the drain timeout, to be re-queued
    seconds: float


class EngineBridge:
    """Runs coroutines on one event-loop thread for many blocking callers."""

    def __init__(self, name: str = "engine-loop") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closing = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closers: list[Callable[[], Awaitable[None] | None]] = []
        self.in_flight = InFlightGauge()

    @property
    def closing(self) -> bool:
        return self._closing

    def start(self) -> None:
        """Start the loop thread; idempotent. `run` calls it on first use."""
        with self._lock:
            if self._closing:
                raise BridgeClosed("the bridge is shut down")
            if self._thread is not None:
                return
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()
                loop.close()

            # Daemon so a worker killed without shutdown() does not hang at exit.
            thread = threading.Thread(target=serve, name=self._name, daemon=True)
            thread.start()
            ready.wait()
            self._loop, self._thread = loop, thread

    def on_shutdown(self, closer: Callable[[], Awaitable[None] | None]) -> None:
        """Register a callable run on the loop after the drain (e.g. engine shutdown)."""
        self._closers.append(closer)

    def run(
        self,
        make_coro: Callable[[], Coroutine[Any, Any, T]],
        *,
        timeout_s: float | None,
        count_in_flight: bool = True,
    ) -> T:
        """Run `make_coro()` on the loop and block until it returns.

        Raises what the coroutine raised, `BridgeTimeout` after `timeout_s`, or
        `BridgeClosed` when the bridge is (or goes) down. `count_in_flight`
        is off for housekeeping calls that are not pages.
        """
        self.start()
        # Submitting under the lock that shutdown() takes to set `_closing`
        # orders every accepted page before the drain: the drain then sees it.
        with self._lock:
            if self._closing or self._loop is None:
                raise BridgeClosed("the worker is shutting down")
            future = asyncio.run_coroutine_threadsafe(
                self._tracked(make_coro, count_in_flight), self._loop
            )
        try:
            return future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            # Cancelling the task makes the engine abort the request, so its
            # batch slot is freed for the pages still waiting.
            future.cancel()
            raise BridgeTimeout(f"no answer within {timeout_s} s") from None
        except concurrent.futures.CancelledError:
            raise BridgeClosed("cancelled while the worker shut down") from None

    async def _tracked(self, make_coro: Callable[[], Coroutine[Any, Any, T]], count: bool) -> T:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        if count:
            self.in_flight.add(1)
        try:
            return await make_coro()
        finally:
            if count:
                self.in_flight.add(-1)
            self._tasks.discard(task)

    def shutdown(self, *, drain_timeout_s: float) -> ShutdownReport:
        """Refuse new pages, drain those in flight, cancel what is left, stop."""
        started = time.monotonic()
        with self._lock:
            already = self._closing
            self._closing = True
            loop, thread = self._loop, self._thread
        if already or loop is None or thread is None:
            return ShutdownReport(0, 0, 0.0)
        before = self.in_flight.value
        cancelled = asyncio.run_coroutine_threadsafe(self._drain(drain_timeout_s), loop).result()
        asyncio.run_coroutine_threadsafe(self._close(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        report = ShutdownReport(
            drained=max(before - cancelled, 0),
            cancelled=cancelled,
            seconds=time.monotonic() - started,
        )
        logger.info(
            "engine bridge stopped: %d pages drained, %d cancelled for re-queue, %.1f s",
            report.drained,
            report.cancelled,
            report.seconds,
        )
        return report

    async def _drain(self, drain_timeout_s: float) -> int:
        pending = set(self._tasks)
        if pending:
            _, still = await asyncio.wait(pending, timeout=drain_timeout_s)
            pending = set(still)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
        return len(pending)

    async def _close(self) -> None:
        for closer in reversed(self._closers):
            try:
                result = closer()
                if result is not None:
                    await result
            except Exception:
                # A failing engine shutdown must not keep the worker alive.
                logger.exception("engine closer failed during bridge shutdown")
