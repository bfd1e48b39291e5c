"""Aggregate numbers over documents: each metric's mean over the documents that have it.

The mean is over documents, not characters or fields, so one long document does not
outweigh the rest; every aggregate says how many documents it is the mean of.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from cli.evaluation.runner import DocumentRun
from cli.evaluation.scoring import DocumentScores

ALL = "all"


@dataclass(frozen=True)
class Metric:
    name: str
    lower_is_better: bool
    value_of: Callable[[DocumentScores], float | None]


METRICS: tuple[Metric, ...] = (
    Metric("character_error_rate", True, lambda s: s.character_error_rate),
    Metric("bag_of_words_error_rate", True, lambda s: s.bag_of_words_error_rate),
    Metric("invoice_field_recall", False, lambda s: s.fields.recall if s.fields else None),
    Metric("table_rows", False, lambda s: s.table.rows if s.table else None),
    Metric("table_columns", False, lambda s: s.table.columns if s.table else None),
    Metric("table_cells", False, lambda s: s.table.cells if s.table else None),
)
METRICS_BY_NAME = {metric.name: metric for metric in METRICS}


@dataclass(frozen=True)
class Aggregate:
    documents: int
    failed: int  # documents the pipeline could not convert
    pages: int
    seconds: float
    means: dict[str, float | None]  # None when no document has that ground truth
    counts: dict[str, int]  # documents each mean is over

    def as_json(self) -> dict[str, object]:
        return {
            "documents": self.documents,
            "failed": self.failed,
            "pages": self.pages,
            "seconds": round(self.seconds, 3),
            "metrics": {
                name: {"mean": self.means[name], "documents": self.counts[name]}
                for name in self.means
            },
        }


def aggregate(runs: Iterable[DocumentRun]) -> Aggregate:
    runs = list(runs)
    means: dict[str, float | None] = {}
    counts: dict[str, int] = {}
    for metric in METRICS:
        values = [
            value
            for run in runs
            if run.scores is not None and (value := metric.value_of(run.scores)) is not None
        ]
        means[metric.name] = sum(values) / len(values) if values else None
        counts[metric.name] = len(values)
    return Aggregate(
        documents=len(runs),
        failed=sum(1 for run in runs if run.error is not None),
        pages=sum(len(run.pages) for run in runs),
        seconds=sum(run.seconds for run in runs),
        means=means,
        counts=counts,
    )


def aggregates_by_group(runs: list[DocumentRun]) -> dict[str, Aggregate]:
    """`all`, then one aggregate per variant ("original", "noise", ...) in order of first use."""
    variants = list(dict.fromkeys(run.case.variant for run in runs))
    groups = {ALL: aggregate(runs)}
    for variant in variants:
        groups[variant] = aggregate(run for run in runs if run.case.variant == variant)
    return groups
