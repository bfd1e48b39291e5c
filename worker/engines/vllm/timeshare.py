"""Time-share attribution of device time to the pages that shared it.

Pages share a batch, so a page's wall time overstates what it cost. The rule:
split the device's timeline at every page's start and end; in a segment of
length d with k pages active, charge each d/k. The charges then add up exactly
to the time the device was busy, and the time nobody was active is idle,
recorded apart so utilisation and the all-in cost per page stay visible.

Two details make this exact rather than approximately right:

* Time is kept in integer nanoseconds and a segment's remainder (d mod k) is
  handed out one nanosecond at a time in a fixed order, so the sum of charges
  equals busy time to the nanosecond, not to float rounding.
* Starts are learnt late: the engine reports a page's start (`scheduled_ts`)
  with its first output, after other pages may already have finished. So the
  timeline is only settled up to a watermark before which nothing can change:
  no page that is submitted but not yet started. A running page counts as
  active up to the latest engine timestamp seen on any page: the engine
  steps all running pages together, so one that had finished by then would
  have said so in the same step's outputs. A page's charge is final once the
  watermark passes its end; `settle(force_until_ns=...)` exists for when
  waiting longer is not worth it (a late start is then clamped to the
  settled frontier).
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass

NS_PER_S = 1_000_000_000


def to_ns(seconds: float) -> int:
    """Engine timestamps are float seconds of the monotonic clock."""
    return round(seconds * NS_PER_S)


@dataclass
class _Page:
    opened_ns: int
    begin_ns: int | None = None
    end_ns: int | None = None
    seen_ns: int | None = None  # latest time the page was known to be running
    charged_ns: int = 0
    abandoned: bool = False  # aborted: nobody will take its charge


@dataclass(frozen=True)
class Usage:
    """The accountant's totals over its settled timeline."""

    busy_ns: int  # time with at least one page active; equals the sum of charges
    idle_ns: int  # settled time with no page active
    charged_ns: int  # charges handed out, to finished and running pages alike
    abandoned_ns: int  # part of charged_ns that went to aborted pages
    settled_until_ns: int
    origin_ns: int

    @property
    def busy_seconds(self) -> float:
        return self.busy_ns / NS_PER_S

    @property
    def idle_seconds(self) -> float:
        return self.idle_ns / NS_PER_S

    @property
    def utilisation(self) -> float:
        span = self.busy_ns + self.idle_ns
        return self.busy_ns / span if span else 0.0


class TimeShareAccountant:
    """Splits one device's busy time among the pages active on it. Thread-safe.

    Life of a page, all times in the engine's monotonic clock:
    `open` when submitted, `begin` when the engine scheduled it, `progress`
    whenever an output shows it still running, `end` when it finished (or was
    aborted), then `take` its charge once `settle` has passed its end.
    """

    def __init__(self, *, origin_ns: int, device_count: int = 1) -> None:
        if device_count < 1:
            raise ValueError("device_count must be at least 1")
        self._lock = threading.Lock()
        self._pages: dict[str, _Page] = {}
        self._frontier_ns = origin_ns
        self._origin_ns = origin_ns
        self._latest_ns = origin_ns  # latest engine timestamp reported on any page
        self._busy_ns = 0
        self._idle_ns = 0
        self._charged_ns = 0
        self._abandoned_ns = 0
        # Tensor parallelism: one page-second on a k-GPU engine costs k GPU-seconds.
        self.device_count = device_count

    def restart(self, at_ns: int) -> None:
        """Start the timeline at `at_ns` (when the engine became ready), so
        loading the weights does not count as idle. Only before any page."""
        with self._lock:
            if self._pages or self._busy_ns or self._idle_ns:
                raise RuntimeError("the accountant has already counted time")
            self._origin_ns = self._frontier_ns = self._latest_ns = at_ns

    def open(self, key: str, at_ns: int) -> None:
        with self._lock:
            if key in self._pages:
                raise KeyError(f"page {key!r} is already open")
            self._pages[key] = _Page(opened_ns=max(at_ns, self._frontier_ns))

    def begin(self, key: str, at_ns: int) -> None:
        with self._lock:
            page = self._pages[key]
            if page.begin_ns is None:
                # A start before the settled frontier can only be reported
                # after a forced settle; the settled past cannot be reopened.
                page.begin_ns = max(at_ns, self._frontier_ns)
                page.seen_ns = max(page.begin_ns, page.seen_ns or 0)
                self._latest_ns = max(self._latest_ns, page.begin_ns)

    def progress(self, key: str, at_ns: int) -> None:
        with self._lock:
            page = self._pages[key]
            if page.begin_ns is not None:
                page.seen_ns = max(at_ns, page.seen_ns or 0)
                self._latest_ns = max(self._latest_ns, at_ns)

    def end(self, key: str, at_ns: int) -> None:
        """The page stopped using the device at `at_ns` (finished or aborted)."""
        with self._lock:
            page = self._pages[key]
            if page.begin_ns is None:
                # Never started: it used no device time. Drop it so it does not
                # hold the watermark back.
                del self._pages[key]
                return
            page.end_ns = max(at_ns, page.begin_ns, self._frontier_ns)
            self._latest_ns = max(self._latest_ns, page.end_ns)

    def abandon(self, key: str, at_ns: int) -> None:
        """The page was aborted at `at_ns`: charge its device time, to nobody.

        Its share still counts as busy time (the device did the work) and is
        reported as abandoned; the page leaves once settled.
        """
        with self._lock:
            page = self._pages.get(key)
            if page is None:
                return
            if page.begin_ns is None:
                del self._pages[key]
                return
            page.end_ns = max(at_ns, page.begin_ns, self._frontier_ns)
            page.abandoned = True

    def settle(self, *, force_until_ns: int | None = None) -> int:
        """Charge every segment up to the watermark; return the new frontier.

        With `force_until_ns`, settle up to there regardless: pages not yet
        started count as inactive, running pages as active.
        """
        with self._lock:
            until = self._watermark() if force_until_ns is None else force_until_ns
            self._advance(until)
            for key in [k for k, p in self._pages.items() if p.abandoned and self._is_final(p)]:
                self._abandoned_ns += self._pages.pop(key).charged_ns
            return self._frontier_ns

    def take(self, key: str) -> int | None:
        """The page's final charge in device-nanoseconds, or None if not yet final."""
        with self._lock:
            page = self._pages.get(key)
            if page is None or not self._is_final(page):
                return None
            del self._pages[key]
            return page.charged_ns * self.device_count

    def usage(self) -> Usage:
        with self._lock:
            return Usage(
                busy_ns=self._busy_ns * self.device_count,
                idle_ns=self._idle_ns,
                charged_ns=self._charged_ns * self.device_count,
                abandoned_ns=self._abandoned_ns * self.device_count,
                settled_until_ns=self._frontier_ns,
                origin_ns=self._origin_ns,
            )

    def _is_final(self, page: _Page) -> bool:
        return page.end_ns is not None and page.end_ns <= self._frontier_ns

    def _watermark(self) -> int:
        limit: int | None = None
        for page in self._pages.values():
            if page.begin_ns is None:
                bound = page.opened_ns  # may still start as early as this
            elif page.end_ns is None:
                bound = max(page.seen_ns or page.begin_ns, self._latest_ns)
            else:
                continue
            limit = bound if limit is None else min(limit, bound)
        if limit is None:
            # Nothing open or running: everything up to the last known end is final.
            ends = [p.end_ns for p in self._pages.values() if p.end_ns is not None]
            limit = max(ends, default=self._frontier_ns)
        return limit

    def _advance(self, until: int) -> None:
        if until <= self._frontier_ns:
            return
        started = [
            (key, page)
            for key, page in sorted(self._pages.items())
            if page.begin_ns is not None and page.begin_ns < until
        ]
        cuts = {self._frontier_ns, until}
        for _, page in started:
            for point in (page.begin_ns, page.end_ns):
                if point is not None and self._frontier_ns < point < until:
                    cuts.add(point)
        points = sorted(cuts)
        for start, stop in itertools.pairwise(points):
            active = [
                page
                for _, page in started
                if page.begin_ns is not None
                and page.begin_ns <= start
                and (page.end_ns is None or page.end_ns > start)
            ]
            self._charge(active, stop - start)
        self._frontier_ns = until

    def _charge(self, active: list[_Page], duration_ns: int) -> None:
        if not active:
            self._idle_ns += duration_ns
            return
        share, remainder = divmod(duration_ns, len(active))
        for index, page in enumerate(active):
            # The remainder goes one nanosecond each to the first pages (in key
            # order), so the shares add up to the segment exactly.
            page.charged_ns += share + (1 if index < remainder else 0)
        self._busy_ns += duration_ns
        self._charged_ns += duration_ns
