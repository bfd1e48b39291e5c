"""A job's totals: what its pages add up to."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol


class ChargedPage(Protocol):
    @property
    def device_seconds(self) -> float | None: ...
    @property
    def cost_usd(self) -> Decimal | None: ...


@dataclass(frozen=True)
class JobUsage:
    device_seconds: float
    cost_usd: Decimal


def job_usage(pages: Iterable[ChargedPage]) -> JobUsage:
    """Device seconds and cost summed over a job's pages; a page not yet charged
    counts as nothing."""
    seconds = 0.0
    cost = Decimal(0)
    for page in pages:
        seconds += page.device_seconds or 0.0
        cost += page.cost_usd or Decimal(0)
    return JobUsage(device_seconds=seconds, cost_usd=cost)
