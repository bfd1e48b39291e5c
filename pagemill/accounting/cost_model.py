"""Cost against what a page holds: cost = a + b1 * m1 + b2 * m2 ..., fitted by least
squares of the relative error over an engine's recent pages, for the quote
(pagemill.accounting.quote).

A page's measures are named (`Measures`); a fit uses the terms every one of its points
has. When the full set of terms cannot be trusted, a smaller set may be.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

# Fewer priced pages with the measures than this and a model is not trusted: the mean
# prices the page. Enough for the slopes to stand above the noise of a few odd pages.
MIN_FIT_PAGES = 10

Measures = Mapping[str, float]


@dataclass(frozen=True)
class CostModel:
    """cost = intercept + sum(slope * measure), in USD a page."""

    terms: tuple[str, ...]
    intercept: float
    slopes: tuple[float, ...]

    def at(self, measures: Measures) -> float:
        return self.intercept + sum(
            slope * measures[term] for term, slope in zip(self.terms, self.slopes, strict=True)
        )


def fit_cost_model(
    terms: Sequence[str], points: Sequence[tuple[Measures, float]]
) -> CostModel | None:
    """Least squares of the relative error of cost on the terms over the points that have
    them all; None with too few such points, terms that do not vary apart, a point that
    cost nothing, or a slope at or below zero (a page holding more would be priced below
    one holding less)."""
    usable = [(measures, cost) for measures, cost in points if all(t in measures for t in terms)]
    if len(usable) < MIN_FIT_PAGES:
        return None
    design = np.array(
        [[1.0, *(measures[term] for term in terms)] for measures, _ in usable], dtype=float
    )
    costs = np.array([cost for _, cost in usable], dtype=float)
    if np.linalg.matrix_rank(design) < len(terms) + 1 or np.any(costs <= 0):
        return None
    # Each point weighed by its cost's inverse: the fit keeps the relative error small, as
    # a quote is judged (a page quoted at twice its cost is as wrong cheap as dear). Fitted
    # on all but one of 24 OCR pages and tried on that one, the worst page was 27 % off
    # rather than 34 % by plain least squares, the median 8.2 % rather than 9.0 %.
    weights = 1 / costs
    solution, *_ = np.linalg.lstsq(design * weights[:, None], costs * weights, rcond=None)
    slopes = tuple(float(value) for value in solution[1:])
    if any(slope <= 0 for slope in slopes):
        return None
    return CostModel(tuple(terms), float(solution[0]), slopes)


class CostModels:
    """The models an engine's recent pages support, each fitted once when first asked.

    `term_sets` are the models to try, best first; by default every set of the terms,
    the larger before the smaller and in the terms' order within a size."""

    def __init__(
        self,
        terms: Sequence[str],
        points: Sequence[tuple[Measures, float]],
        term_sets: Sequence[tuple[str, ...]] | None = None,
    ) -> None:
        self._term_sets = tuple(term_sets) if term_sets is not None else every_subset(terms)
        self._points = points
        self._fitted: dict[tuple[str, ...], CostModel | None] = {}

    def for_page(self, measures: Measures) -> CostModel | None:
        """The first model the page has measures for that can be trusted; None when none
        can."""
        for subset in self._term_sets:
            if not all(term in measures for term in subset):
                continue
            if subset not in self._fitted:
                self._fitted[subset] = fit_cost_model(subset, self._points)
            model = self._fitted[subset]
            if model is not None:
                return model
        return None


def every_subset(terms: Sequence[str]) -> tuple[tuple[str, ...], ...]:
    """Every non-empty set of the terms, the larger first, in the terms' order within a size."""
    return tuple(
        subset for size in range(len(terms), 0, -1) for subset in combinations(terms, size)
    )
