"""The quote: what a job is expected to cost, given at submit.

Each selected page is priced by the engine it will most likely be routed to, by the
rule prepare routes it by (pagemill.routing) applied to what inspection measured of
the page. A page costs an engine about in line with how much it holds: its text layer
characters for the text layer engine, its ink (pagemill.documents.facts.ink_fraction)
for OCR. So the quote fits cost = a + b * measure over the engine's recent pages and
prices the page by it, or at the engine's recent mean cost where the fit cannot be
trusted (too few pages, a flat or falling line, a price at or below zero) or the page
was not measured. A page inspection cannot tell (not measured, or no history to go by)
is priced as OCR would read it: the dearer guess. A page that draws nothing is free: it
is found blank before any OCR engine runs (worker.stages.quality).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sqlalchemy.orm import Session

from pagemill.accounting import repository
from pagemill.accounting.pricing import SECONDS_PER_HOUR, USD_PRECISION, price_usd_per_hour
from pagemill.documents.facts import TextLayerFacts
from pagemill.documents.inspect import DocumentInfo
from pagemill.domain import SourceKind
from pagemill.routing import TEXT_LAYER_ENGINE, route_page
from pagemill.settings import Settings

# Pages whose recent cost makes up the quote: enough to smooth noise, recent
# enough to follow a price change.
QUOTE_WINDOW_PAGES = 500
# Fewer priced pages with a measure than this and the line is not trusted: the mean
# prices the page. Enough for a slope to stand above the noise of a few odd pages.
MIN_FIT_PAGES = 10
# The key prepare keeps a page's ink under in pages.facts (worker.render_child).
INK_FACT = "ink_fraction"
# What a page inspection did not measure is taken to have: no text layer, which
# `auto` routes to OCR.
UNMEASURED = TextLayerFacts(
    text_chars=0, unreadable_chars=0, invisible_text_chars=0, image_coverage=0.0
)


def mean_page_cost_usd(session: Session, settings: Settings, engine: str) -> Decimal:
    """The recent mean cost of a page the engine read; with no history yet, the
    configured fallback device seconds at this price."""
    mean = repository.mean_cost_per_page(session, engine, QUOTE_WINDOW_PAGES)
    if mean is not None:
        return mean
    seconds = Decimal(str(settings.quote_fallback_seconds_per_page))
    return seconds * price_usd_per_hour(settings) / SECONDS_PER_HOUR


@dataclass(frozen=True)
class CostLine:
    """cost = intercept + slope * measure, in USD a page."""

    intercept: float
    slope: float

    def at(self, measure: float) -> float:
        return self.intercept + self.slope * measure


def fit_cost_line(points: Sequence[tuple[float, float]]) -> CostLine | None:
    """Least squares over (measure, cost) points; None when there are too few points or
    cost does not rise with the measure (a flat or falling line would price a dense page
    below a sparse one)."""
    if len(points) < MIN_FIT_PAGES:
        return None
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    if spread <= 0:
        return None
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread
    if slope <= 0:
        return None
    return CostLine(mean_y - slope * mean_x, slope)


def history_measure(engine: str, text_chars: int | None, facts: dict[str, Any]) -> float | None:
    """How much a priced page held, as the quote measures it for its engine."""
    if engine == TEXT_LAYER_ENGINE:
        return None if text_chars is None else float(text_chars)
    ink = facts.get(INK_FACT)
    return None if ink is None else float(ink)


@dataclass(frozen=True)
class PageCosts:
    """What an engine's recent pages say a page costs: their mean, and the line through
    cost against measure when one fits."""

    mean_usd: Decimal
    line: CostLine | None

    @classmethod
    def recent(cls, session: Session, settings: Settings, engine: str) -> PageCosts:
        points = []
        for cost, text_chars, facts in repository.recent_page_costs(
            session, engine, QUOTE_WINDOW_PAGES
        ):
            measure = history_measure(engine, text_chars, facts)
            if measure is not None:
                points.append((measure, float(cost)))
        return cls(mean_page_cost_usd(session, settings, engine), fit_cost_line(points))

    def of_page(self, measure: float | None) -> Decimal:
        """The page's cost from the line; the mean for a page not measured, or where
        the line would price it at or below zero."""
        if self.line is None or measure is None:
            return self.mean_usd
        predicted = self.line.at(measure)
        if predicted <= 0:
            return self.mean_usd
        return Decimal(repr(predicted))


def quote_usd(
    session: Session,
    settings: Settings,
    info: DocumentInfo,
    numbers: Sequence[int],
    requested: str,
    ocr_engine: str,
) -> Decimal:
    """The selected pages, each at what its likely engine's recent pages say a page
    holding as much costs (`PageCosts`)."""
    has_pdf_page = info.kind is SourceKind.pdf
    costs: dict[str, PageCosts] = {}
    total = Decimal(0)
    for number in numbers:
        measured = info.facts_of(number)
        facts = measured or UNMEASURED
        engine = route_page(requested, facts, has_pdf_page, ocr_engine).engine
        if facts.draws_nothing and engine != TEXT_LAYER_ENGINE:
            continue  # found blank before OCR: free
        if engine not in costs:
            costs[engine] = PageCosts.recent(session, settings, engine)
        if engine == TEXT_LAYER_ENGINE:
            measure = None if measured is None else float(measured.text_chars)
        else:
            measure = info.ink_of(number)
        total += costs[engine].of_page(measure)
    return total.quantize(USD_PRECISION)
