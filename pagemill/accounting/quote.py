"""The quote: what a job is expected to cost, given at submit."""

from __future__ import annotations

from decimal import Decimal

from sqlalchemy.orm import Session

from pagemill.accounting import repository
from pagemill.accounting.pricing import SECONDS_PER_HOUR, USD_PRECISION, price_usd_per_hour
from pagemill.settings import Settings

# Pages whose recent cost makes up the quote: enough to smooth noise, recent
# enough to follow a price change.
QUOTE_WINDOW_PAGES = 500


def mean_page_cost_usd(session: Session, settings: Settings, engine: str) -> Decimal:
    """The recent mean cost of a page the engine read; with no history yet, the
    configured fallback device seconds at this price."""
    mean = repository.mean_cost_per_page(session, engine, QUOTE_WINDOW_PAGES)
    if mean is not None:
        return mean
    seconds = Decimal(str(settings.quote_fallback_seconds_per_page))
    return seconds * price_usd_per_hour(settings) / SECONDS_PER_HOUR


def quote_usd(session: Session, settings: Settings, engine: str, pages: int) -> Decimal:
    """Pages x the recent mean cost per page of the engine that will run them (the
    OCR engine: text-layer pages only ever cost less)."""
    return (mean_page_cost_usd(session, settings, engine) * pages).quantize(USD_PRECISION)
