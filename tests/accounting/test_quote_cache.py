"""The quote keeps each engine's recent costs for `quote_model_ttl_s`: read once and then
reused at each submit, read again once they have expired."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import pytest

from pagemill.domain import SourceKind
from pagemill.settings import Settings
from tests.accounting.test_quote_measures import add_history, ocr_history
from tests.support.factories import add_job

SIZES = [(1240, 1754), (2480, 3508)]


@pytest.fixture()
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    from pagemill.accounting import quote

    now = [1000.0]
    monkeypatch.setattr(quote.RECENT_COSTS, "clock", lambda: now[0])
    quote.RECENT_COSTS.clear()
    yield now
    quote.RECENT_COSTS.clear()


@pytest.fixture()
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The engines whose recent pages were read from the database, in order."""
    from pagemill.accounting import repository

    engines: list[str] = []
    read = repository.recent_page_costs

    def counted(session: object, engine: str, window: int) -> list[repository.PricedPage]:
        engines.append(engine)
        return read(session, engine, window)  # type: ignore[arg-type]

    monkeypatch.setattr(repository, "recent_page_costs", counted)
    return engines


def scan_quote(settings: Settings) -> Decimal:
    from pagemill.accounting.quote import quote_usd
    from pagemill.db.session import session_scope
    from pagemill.documents.inspect import DocumentInfo

    info = DocumentInfo(SourceKind.png, 1, page_ink=(0.03,), page_sizes=(SIZES[0],))
    with session_scope() as session:
        return quote_usd(session, settings, info, [1], "auto", "rapidocr")


def add_dearer_history() -> None:
    """As many pages again at three times the cost: enough to move mean and fit."""
    from pagemill.clients.repository import create_client
    from pagemill.db.session import session_scope

    pages = ocr_history(SIZES)
    with session_scope() as session:
        client, _ = create_client(session, "dearer-history")
        dearer = [
            {**page, "engine": "rapidocr", "cost_usd": 3 * page["cost_usd"]} for page in pages
        ]  # type: ignore[operator]
        add_job(session, client.id, dearer)


def test_an_engines_costs_are_read_once_within_the_ttl_then_again(
    db: str, clock: list[float], reads: list[str]
) -> None:
    settings = Settings(quote_model_ttl_s=30)
    add_history("rapidocr", ocr_history(SIZES))
    first = scan_quote(settings)
    add_dearer_history()

    clock[0] += 29
    assert scan_quote(settings) == first  # the history moved, the kept model did not
    assert reads == ["rapidocr"]

    clock[0] += 2
    assert scan_quote(settings) > first
    assert reads == ["rapidocr", "rapidocr"]


def test_a_ttl_of_zero_reads_at_every_quote(db: str, clock: list[float], reads: list[str]) -> None:
    settings = Settings(quote_model_ttl_s=0)
    add_history("rapidocr", ocr_history(SIZES))
    first = scan_quote(settings)
    add_dearer_history()
    assert scan_quote(settings) > first
    assert reads == ["rapidocr", "rapidocr"]
