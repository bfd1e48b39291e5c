"""The SQL accounting reads: recent page costs per engine."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from pagemill.db.models import Page
from pagemill.domain import PageStatus


def mean_cost_per_page(session: Session, engine: str, window: int) -> Decimal | None:
    """The mean cost of the engine's last `window` succeeded pages; None with no history.
    Blank pages are left out: no engine read them, and the quote prices them apart."""
    recent = (
        select(Page.cost_usd)
        .where(Page.engine == engine, Page.status == PageStatus.succeeded)
        .where(Page.cost_usd.is_not(None), Page.blank.is_not(True))
        .order_by(Page.finished_at.desc())
        .limit(window)
        .subquery()
    )
    mean = session.scalar(select(func.avg(recent.c.cost_usd)))
    return Decimal(mean) if mean is not None else None


def recent_page_costs(
    session: Session, engine: str, window: int
) -> list[tuple[Decimal, int | None, dict[str, Any]]]:
    """The engine's last `window` succeeded, non-blank pages (the pages the mean is taken
    over): each page's cost, text layer characters and recorded facts."""
    rows = session.execute(
        select(Page.cost_usd, Page.text_chars, Page.facts)
        .where(Page.engine == engine, Page.status == PageStatus.succeeded)
        .where(Page.cost_usd.is_not(None), Page.blank.is_not(True))
        .order_by(Page.finished_at.desc())
        .limit(window)
    )
    return [(cost, text_chars, facts or {}) for cost, text_chars, facts in rows]
