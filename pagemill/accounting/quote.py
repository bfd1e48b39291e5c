"""The quote: what a job is expected to cost, given at submit.

Each selected page is priced at the recent mean cost of the engine it will most
likely be routed to, by the rule prepare routes it by (pagemill.routing) applied to
what inspection measured of the page. A page inspection cannot tell (not measured,
or no history to go by) is priced as OCR would read it: the dearer guess. A page
that draws nothing is free: it is found blank before any OCR engine runs
(worker.stages.quality).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from decimal import Decimal

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
# Stands for the engine of a page no engine reads (a blank page routed to OCR).
NO_ENGINE = ""
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


def likely_engines(
    info: DocumentInfo, numbers: Sequence[int], requested: str, ocr_engine: str
) -> Counter[str]:
    """How many of the selected pages each engine will most likely read (NO_ENGINE:
    pages found blank before OCR)."""
    has_pdf_page = info.kind is SourceKind.pdf
    engines: Counter[str] = Counter()
    for number in numbers:
        facts = info.facts_of(number) or UNMEASURED
        engine = route_page(requested, facts, has_pdf_page, ocr_engine).engine
        blank = facts.draws_nothing and engine != TEXT_LAYER_ENGINE
        engines[NO_ENGINE if blank else engine] += 1
    return engines


def quote_usd(
    session: Session,
    settings: Settings,
    info: DocumentInfo,
    numbers: Sequence[int],
    requested: str,
    ocr_engine: str,
) -> Decimal:
    """The selected pages, each at the recent mean cost of its likely engine."""
    pages = likely_engines(info, numbers, requested, ocr_engine)
    pages.pop(NO_ENGINE, None)
    total = sum(
        (mean_page_cost_usd(session, settings, engine) * count for engine, count in pages.items()),
        Decimal(0),
    )
    return total.quantize(USD_PRECISION)
