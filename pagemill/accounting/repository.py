"""The SQL accounting reads: recent page costs per engine."""

from __future__ import annotations

from decimal import Decimal

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from pagemill.db.models import Page
from pagemill.domain import PageStatus


def mean_cost_per_page(session: Session, engine: str, window: int) -> Decimal | None:
    """The mean cost of the engine's last `window` succeeded pages; None with no history."""
    recent = (
        select(Page.cost_usd)
        .where(Page.engine == engine, Page.status == PageStatus.succeeded)
        .where(Page.cost_usd.is_not(None))
        .order_by(Page.finished_at.desc())
        .limit(window)
        .subquery()
    )
    mean = session.scalar(select(func.avg(recent.c.cost_usd)))
    return Decimal(mean) if mean is not None else None
