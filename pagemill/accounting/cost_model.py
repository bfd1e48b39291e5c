"""Cost against what a page holds: cost = a + b1 * m1 + b2 * m2 ..., fitted by least
squares over an engine's recent pages, for the quote (pagemill.accounting.quote).

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
    """Least squares of cost on the terms over the points that have them all; None with
    too few such points, terms that do not vary apart, or a slope at or below zero (a
    page holding more would be priced below one holding less)."""
    usable = [(measures, cost) for measures, cost in points if all(t in measures for t in terms)]
    if len(usable) < MIN_FIT_PAGES:
        return None
    design = np.array(
        [[1.0, *(measures[term] for term in terms)] for measures, _ in usable], dtype=float
    )
    costs = np.array([cost for _, cost in usable], dtype=float)
    if np.linalg.matrix_rank(design) < len(terms) + 1:
        return None
    solution, *_ = np.linalg.lstsq(design, costs, rcond=None)
    slopes = tuple(float(value) for value in solution[1:])
    if any(slope <= 0 for slope in slopes):
        return None
    return CostModel(tuple(terms), float(solution[0]), slopes)


class CostModels:
    """The models an engine's recent pages support, each fitted once when first asked."""

    def __init__(self, terms: Sequence[str], points: Sequence[tuple[Measures, float]]) -> None:
        self._terms = tuple(terms)
        self._points = points
        self._fitted: dict[tuple[str, ...], CostModel | None] = {}

    def for_page(self, measures: Measures) -> CostModel | None:
        """The model with the most terms the page has measures for that can be trusted;
        None when none can."""
        held = [term for term in self._terms if term in measures]
        for size in range(len(held), 0, -1):
            for subset in combinations(held, size):
                if subset not in self._fitted:
                    self._fitted[subset] = fit_cost_model(subset, self._points)
                model = self._fitted[subset]
                if model is not None:
                    return model
        return None
