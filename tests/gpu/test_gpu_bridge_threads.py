"""The bridge driven from many plain threads: timeouts, failures, shutdown.

The Celery-worker version of these checks is test_gpu_bridge_celery.py;
here each failure mode is isolated and fast.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from worker.bridge import (
    BridgeClosed,
    BridgeTimeout,
    EngineBridge,
    InFlightGauge,
    summarise_samples,
)

pytestmark = pytest.mark.timeout(60)


class Boom(RuntimeError):
    pass


@pytest.fixture
def bridge() -> Iterator[EngineBridge]:
    bridge = EngineBridge(name="test-loop")
    yield bridge
    bridge.shutdown(drain_timeout_s=0)


def test_many_threads_share_one_loop_and_stay_in_flight_together(bridge: EngineBridge) -> None:
    loops: set[int] = set()
    concurrent = InFlightGauge()

    async def page(number: int) -> int:
        loops.add(id(asyncio.get_running_loop()))
        concurrent.add(1)
        await asyncio.sleep(0.3)
        concurrent.add(-1)
        return number * 2

    with ThreadPoolExecutor(max_workers=48) as pool:
        results = list(pool.map(lambda n: bridge.run(lambda: page(n), timeout_s=10), range(48)))
    assert results == [n * 2 for n in range(48)]
    assert len(loops) == 1
    # All 48 blocked callers were in flight at once: one loop, no serialising.
    assert max(value for _, value in concurrent.samples()) == 48
    assert bridge.in_flight.value == 0


def test_a_failing_page_raises_in_its_caller_only(bridge: EngineBridge) -> None:
    async def page(number: int) -> int:
        await asyncio.sleep(0.05)
        if number == 7:
            raise Boom("page 7")
        return number

    def call(number: int) -> object:
        try:
            return bridge.run(lambda: page(number), timeout_s=10)
        except Boom as exc:
            return exc

    with ThreadPoolExecutor(max_workers=40) as pool:
        results = list(pool.map(call, range(40)))
    assert isinstance(results[7], Boom)
    assert [r for i, r in enumerate(results) if i != 7] == [i for i in range(40) if i != 7]


def test_a_hung_page_times_out_is_cancelled_and_others_go_on(bridge: EngineBridge) -> None:
    cancelled = threading.Event()

    async def hung() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()  # the engine would abort the request here
            raise

    async def quick(number: int) -> int:
        await asyncio.sleep(0.05)
        return number

    with ThreadPoolExecutor(max_workers=41) as pool:
        stuck = pool.submit(bridge.run, hung, timeout_s=0.5)
        started = time.monotonic()
        others = list(pool.map(lambda n: bridge.run(lambda: quick(n), timeout_s=10), range(40)))
        assert time.monotonic() - started < 0.5, "the others did not wait for the hung page"
        with pytest.raises(BridgeTimeout):
            stuck.result()
    assert others == list(range(40))
    assert cancelled.wait(timeout=2)
    deadline = time.monotonic() + 2
    while bridge.in_flight.value and time.monotonic() < deadline:
        time.sleep(0.01)
    assert bridge.in_flight.value == 0


def test_shutdown_drains_pages_that_finish_in_time() -> None:
    bridge = EngineBridge()
    closed = threading.Event()
    bridge.on_shutdown(closed.set)

    async def page(number: int) -> int:
        await asyncio.sleep(0.5)
        return number

    with ThreadPoolExecutor(max_workers=40) as pool:
        futures = [pool.submit(bridge.run, lambda n=n: page(n), timeout_s=10) for n in range(40)]
        while bridge.in_flight.value < 40:
            time.sleep(0.01)
        report = bridge.shutdown(drain_timeout_s=5)
        assert [f.result() for f in futures] == list(range(40))
    assert (report.drained, report.cancelled) == (40, 0)
    assert closed.is_set()
    with pytest.raises(BridgeClosed):
        bridge.run(lambda: page(0), timeout_s=1)


def test_shutdown_cancels_what_it_cannot_drain_so_callers_requeue() -> None:
    bridge = EngineBridge()

    async def page(number: int) -> int:
        await asyncio.sleep(0.1 if number < 10 else 30)
        return number

    def call(number: int) -> object:
        try:
            return bridge.run(lambda: page(number), timeout_s=60)
        except BridgeClosed as exc:
            return exc

    with ThreadPoolExecutor(max_workers=40) as pool:
        futures = [pool.submit(call, n) for n in range(40)]
        while bridge.in_flight.value < 40:
            time.sleep(0.01)
        started = time.monotonic()
        report = bridge.shutdown(drain_timeout_s=1)
        results = [f.result() for f in futures]
    assert time.monotonic() - started < 5
    assert results[:10] == list(range(10))
    assert all(isinstance(r, BridgeClosed) for r in results[10:])
    assert (report.drained, report.cancelled) == (10, 30)


def test_gauge_window_is_time_weighted() -> None:
    samples = [(0.0, 0), (1.0, 4), (3.0, 2), (4.0, 0)]
    window = summarise_samples(samples, 1.0, 4.0)
    assert (window.minimum, window.maximum) == (2, 4)
    assert window.mean == pytest.approx((4 * 2 + 2 * 1) / 3)
    assert summarise_samples(samples, 0.5, 1.5).mean == pytest.approx(2.0)
