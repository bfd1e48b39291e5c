"""Thresholds an evaluation must meet, so quality cannot silently regress.

A thresholds file is JSON keyed like the results' aggregates: a group (`all`, `original`
or a variant kind such as `rotate-90`), then a metric name and the worst value allowed.
Whether worse means higher or lower follows from the metric: error rates are maxima,
recall and table agreement minima.

    {"all": {"character_error_rate": 0.10, "invoice_field_recall": 0.80},
     "noise": {"bag_of_words_error_rate": 0.15}}

A threshold on a group or metric the run has no documents for fails too: a folder that
lost its ground truth must not pass by measuring nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cli.evaluation.aggregate import METRICS_BY_NAME, Aggregate


class ThresholdsInvalid(ValueError):
    """The thresholds file cannot be used; the message says why."""


@dataclass(frozen=True)
class ThresholdCheck:
    group: str
    metric: str
    limit: float
    measured: float | None
    passed: bool

    def describe(self) -> str:
        bound = "at most" if METRICS_BY_NAME[self.metric].lower_is_better else "at least"
        measured = "no documents" if self.measured is None else f"{self.measured:.4f}"
        return f"{self.group} {self.metric}: {measured} (must be {bound} {self.limit:g})"

    def as_json(self) -> dict[str, object]:
        return {
            "group": self.group,
            "metric": self.metric,
            "limit": self.limit,
            "measured": self.measured,
            "passed": self.passed,
        }


def load_thresholds(path: Path) -> dict[str, dict[str, float]]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ThresholdsInvalid(f"{path} is not readable JSON: {error}") from None
    if not isinstance(raw, dict):
        raise ThresholdsInvalid(f"{path} must hold a JSON object of groups")
    thresholds: dict[str, dict[str, float]] = {}
    for group, limits in raw.items():
        if not isinstance(limits, dict):
            raise ThresholdsInvalid(f"{path}: {group!r} must map metric names to numbers")
        for metric, limit in limits.items():
            if metric not in METRICS_BY_NAME:
                known = ", ".join(METRICS_BY_NAME)
                raise ThresholdsInvalid(f"{path}: unknown metric {metric!r} (known: {known})")
            if isinstance(limit, bool) or not isinstance(limit, int | float):
                raise ThresholdsInvalid(f"{path}: {group}.{metric} must be a number")
        thresholds[group] = {metric: float(limit) for metric, limit in limits.items()}
    return thresholds


def check_thresholds(
    thresholds: dict[str, dict[str, float]], groups: dict[str, Aggregate]
) -> list[ThresholdCheck]:
    checks = []
    for group, limits in thresholds.items():
        aggregate = groups.get(group)
        for metric, limit in limits.items():
            measured = None if aggregate is None else aggregate.means[metric]
            checks.append(
                ThresholdCheck(group, metric, limit, measured, _meets(metric, measured, limit))
            )
    return checks


def _meets(metric: str, measured: float | None, limit: float) -> bool:
    if measured is None:
        return False
    if METRICS_BY_NAME[metric].lower_is_better:
        return measured <= limit
    return measured >= limit
