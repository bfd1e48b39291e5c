"""The SQL accounting reads: recent page costs per engine."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from pagemill.db.models import Page
from pagemill.domain import PageStatus


def mean_cost_per_page(session: Session, engine: str, window: int) -> Decimal | None:
    """The mean cost of the engine's last `window` priced pages; None with no history."""
    recent = (
        select(Page.cost_usd)
        .where(*_priced_by(engine))
        .order_by(Page.finished_at.desc())
        .limit(window)
        .subquery()
    )
    mean = session.scalar(select(func.avg(recent.c.cost_usd)))
    return Decimal(mean) if mean is not None else None


def _priced_by(engine: str) -> tuple[ColumnElement[bool], ...]:
    """Pages that say what the engine costs: succeeded and charged. Blank pages are left
    out (no engine read them, and the quote prices them apart), and so are pages charged
    nothing, whose result was reused rather than read."""
    return (
        Page.engine == engine,
        Page.status == PageStatus.succeeded,
        Page.cost_usd > 0,
        Page.blank.is_not(True),
    )


@dataclass(frozen=True)
class PricedPage:
    """A page the quote learns from: what it cost and what was measured of it."""

    cost_usd: Decimal
    text_chars: int | None
    facts: dict[str, Any]
    image_pixels: int | None  # of the image its engine read; None without one


def recent_page_costs(session: Session, engine: str, window: int) -> list[PricedPage]:
    """The engine's last `window` priced pages (those the mean is taken over), with their
    cost and measures."""
    rows = session.execute(
        select(
            Page.cost_usd, Page.text_chars, Page.facts, Page.image_width_px, Page.image_height_px
        )
        .where(*_priced_by(engine))
        .order_by(Page.finished_at.desc())
        .limit(window)
    )
    return [
        PricedPage(
            cost,
            text_chars,
            facts or {},
            width * height if width is not None and height is not None else None,
        )
        for cost, text_chars, facts, width, height in rows
    ]
