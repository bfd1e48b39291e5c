"""The time-share accountant against intervals computed by hand."""

from __future__ import annotations

import threading

import pytest

from worker.engines.vllm.timeshare import NS_PER_S, TimeShareAccountant

S = NS_PER_S


def run_intervals(
    accountant: TimeShareAccountant, intervals: dict[str, tuple[int, int]]
) -> dict[str, int]:
    """Report pages the way the runner does: open, begin, end, then settle."""
    for key, (begin, _) in intervals.items():
        accountant.open(key, begin)
        accountant.begin(key, begin)
    for key, (_, end) in intervals.items():
        accountant.end(key, end)
    accountant.settle()
    charges = {key: accountant.take(key) for key in intervals}
    assert all(charge is not None for charge in charges.values())
    return {key: charge for key, charge in charges.items() if charge is not None}


def test_overlapping_pages_share_each_segment_equally() -> None:
    # A [0,10], B [2,6], C [4,12]; by hand:
    # [0,2] A alone: A 2 | [2,4] A,B: 1 each | [4,6] A,B,C: 2/3 each
    # [6,10] A,C: 2 each | [10,12] C alone: 2
    # A = 2 + 1 + 2/3 + 2 = 17/3, B = 1 + 2/3 = 5/3, C = 2/3 + 2 + 2 = 14/3
    accountant = TimeShareAccountant(origin_ns=0)
    charges = run_intervals(
        accountant, {"a": (0, 10 * S), "b": (2 * S, 6 * S), "c": (4 * S, 12 * S)}
    )
    assert charges["a"] == pytest.approx(17 / 3 * S, abs=1)
    assert charges["b"] == pytest.approx(5 / 3 * S, abs=1)
    assert charges["c"] == pytest.approx(14 / 3 * S, abs=1)
    usage = accountant.usage()
    # Exact to the nanosecond: the 2 s shared by three leaves a remainder of
    # 2 ns, handed out one each, so nothing is lost to rounding.
    assert sum(charges.values()) == usage.busy_ns == usage.charged_ns == 12 * S
    assert usage.idle_ns == 0


def test_idle_time_is_kept_apart() -> None:
    # A [1,3], gap, B [5,6] and C [5,8]; the timeline starts at 0.
    accountant = TimeShareAccountant(origin_ns=0)
    charges = run_intervals(accountant, {"a": (1 * S, 3 * S)})
    charges |= run_intervals(accountant, {"b": (5 * S, 6 * S), "c": (5 * S, 8 * S)})
    assert charges == {"a": 2 * S, "b": S // 2, "c": S // 2 + 2 * S}
    usage = accountant.usage()
    assert usage.busy_ns == sum(charges.values()) == 2 * S + 3 * S  # [1,3] and [5,8]
    assert usage.idle_ns == 1 * S + 2 * S  # [0,1] and [3,5]
    assert usage.busy_ns + usage.idle_ns == usage.settled_until_ns - usage.origin_ns == 8 * S
    assert usage.utilisation == pytest.approx(5 / 8)


def test_remainders_keep_the_sum_exact() -> None:
    # 10 ns shared by three pages: 4 + 3 + 3, never 3.33 each.
    accountant = TimeShareAccountant(origin_ns=0)
    charges = run_intervals(accountant, {"x": (0, 10), "y": (0, 10), "z": (0, 10)})
    assert sorted(charges.values()) == [3, 3, 4]
    assert sum(charges.values()) == accountant.usage().busy_ns == 10


def test_device_count_multiplies_charges() -> None:
    accountant = TimeShareAccountant(origin_ns=0, device_count=2)
    charges = run_intervals(accountant, {"a": (0, 4 * S), "b": (2 * S, 4 * S)})
    assert charges == {"a": 6 * S, "b": 2 * S}  # (2 + 1) and 1 page-seconds, times 2 GPUs
    assert accountant.usage().busy_ns == 8 * S


def test_a_page_is_not_final_while_an_earlier_page_has_not_started() -> None:
    accountant = TimeShareAccountant(origin_ns=0)
    accountant.open("early", 0)
    accountant.begin("early", 0)
    accountant.open("late", 1 * S)  # submitted at 1 s, start not yet known
    accountant.end("early", 4 * S)
    accountant.settle()
    assert accountant.take("early") is None  # "late" may have shared [1, 4]
    accountant.begin("late", 2 * S)  # scheduled at 2 s, learnt only now
    accountant.progress("late", 5 * S)
    accountant.settle()
    assert accountant.take("early") == 2 * S + 1 * S  # [0,2] alone, [2,4] half
    accountant.end("late", 6 * S)
    accountant.settle()
    assert accountant.take("late") == 1 * S + 2 * S  # [2,4] half, [4,6] alone
    assert accountant.usage().busy_ns == 6 * S


def test_forced_settle_and_abandoned_pages() -> None:
    accountant = TimeShareAccountant(origin_ns=0)
    accountant.open("done", 0)
    accountant.begin("done", 0)
    accountant.open("stuck", 0)  # never starts
    accountant.end("done", 2 * S)
    accountant.settle(force_until_ns=2 * S)
    assert accountant.take("done") == 2 * S
    accountant.open("aborted", 3 * S)
    accountant.begin("aborted", 3 * S)
    accountant.abandon("aborted", 4 * S)
    accountant.abandon("stuck", 4 * S)  # never started: costs nothing
    accountant.settle()
    usage = accountant.usage()
    assert usage.abandoned_ns == 1 * S
    assert usage.busy_ns == usage.charged_ns == 3 * S
    assert usage.idle_ns == 1 * S


def test_restart_moves_the_origin_only_before_any_page() -> None:
    accountant = TimeShareAccountant(origin_ns=0)
    accountant.restart(5 * S)
    run_intervals(accountant, {"a": (6 * S, 7 * S)})
    assert accountant.usage().idle_ns == 1 * S
    with pytest.raises(RuntimeError):
        accountant.restart(8 * S)


def test_charges_add_up_under_concurrent_reporting() -> None:
    accountant = TimeShareAccountant(origin_ns=0)
    charges: list[int] = []
    lock = threading.Lock()

    def page(index: int) -> None:
        key = f"p{index:03d}"
        begin = (index % 17) * 1_000_003
        accountant.open(key, begin)
        accountant.begin(key, begin)
        accountant.end(key, begin + 5_000_011 + index * 7919)
        accountant.settle()
        charge = accountant.take(key)
        while charge is None:
            accountant.settle()
            charge = accountant.take(key)
        with lock:
            charges.append(charge)

    threads = [threading.Thread(target=page, args=(i,)) for i in range(64)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    usage = accountant.usage()
    assert len(charges) == 64
    assert sum(charges) == usage.busy_ns == usage.charged_ns
