"""Page quotas: how many pages a client may submit per UTC day and per calendar month.

A client's own limits (clients.page_quota_day / _month) override the deployment's
(PAGEMILL_DEFAULT_PAGE_QUOTA_DAY / _MONTH); None is no limit. Usage is the pages of the
client's jobs created in the window, summed from the jobs table itself, so it can never
drift from what was accepted; cache hits ran no engine and do not count.

The check is exact under concurrent submissions: `check_pages(lock=True)` locks the
client's row, counts, and the caller inserts its job in the same transaction, so the
next submission of that client counts it (pagemill.jobs.service.submit_job).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from pagemill.clients import repository
from pagemill.db.models import Client
from pagemill.domain import InputRejected
from pagemill.settings import Settings


@dataclass(frozen=True)
class QuotaWindow:
    period: str  # "day" or "month"
    limit: int | None  # None: unlimited
    used: int
    resets_at: datetime

    @property
    def remaining(self) -> int | None:
        return None if self.limit is None else max(0, self.limit - self.used)

    def admits(self, pages: int) -> bool:
        return self.limit is None or self.used + pages <= self.limit

    def as_dict(self) -> dict[str, Any]:
        return {
            "period": self.period,
            "limit": self.limit,
            "used": self.used,
            "remaining": self.remaining,
            "resets_at": self.resets_at.isoformat().replace("+00:00", "Z"),
        }


@dataclass(frozen=True)
class PageUsage:
    now: datetime
    day: QuotaWindow
    month: QuotaWindow


class QuotaExceeded(InputRejected):
    """The submission's pages would take the client past a quota; nothing was created."""

    def __init__(self, window: QuotaWindow, requested: int, now: datetime) -> None:
        super().__init__(
            "quota_exceeded",
            f"This job has {requested} pages; {window.remaining} of the {window.limit} pages "
            f"a {window.period} remain. The {window.period}'s quota resets at "
            f"{window.as_dict()['resets_at']}.",
            429,
        )
        self.window = window
        self.requested = requested
        self.retry_after_s = max(1, math.ceil((window.resets_at - now).total_seconds()))

    def details(self) -> dict[str, Any]:
        return {**self.window.as_dict(), "requested": self.requested}


def limits(settings: Settings, client: Client) -> tuple[int | None, int | None]:
    day = client.page_quota_day
    month = client.page_quota_month
    return (
        settings.default_page_quota_day if day is None else day,
        settings.default_page_quota_month if month is None else month,
    )


def page_usage(session: Session, settings: Settings, client: Client) -> PageUsage:
    now = repository.database_now(session).astimezone(UTC)
    day_start = now.replace(hour=0, minute=0, second=0, microsecond=0)
    month_start = day_start.replace(day=1)
    next_month = (month_start + timedelta(days=32)).replace(day=1)
    used_day, used_month = repository.pages_submitted_since(
        session, client.id, day_start, month_start
    )
    limit_day, limit_month = limits(settings, client)
    return PageUsage(
        now=now,
        day=QuotaWindow("day", limit_day, used_day, day_start + timedelta(days=1)),
        month=QuotaWindow("month", limit_month, used_month, next_month),
    )


def check_pages(
    session: Session, settings: Settings, client: Client, pages: int, lock: bool
) -> None:
    """Raise QuotaExceeded if `pages` more would pass a quota. With `lock`, the client's
    row stays locked until the caller's transaction ends: the caller records its job in
    that transaction, or rolls back."""
    if lock:
        locked = repository.lock_client(session, client.id)
        client = locked if locked is not None else client
    if limits(settings, client) == (None, None):
        return
    usage = page_usage(session, settings, client)
    exceeded = [window for window in (usage.day, usage.month) if not window.admits(pages)]
    if exceeded:
        # Past both, only the later reset helps.
        raise QuotaExceeded(max(exceeded, key=lambda w: w.resets_at), pages, usage.now)
