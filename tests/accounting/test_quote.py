"""Quotes that predict: each page at the recent mean cost of the engine it will most
likely be routed to, against real Postgres and through the real submit path."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import pymupdf
import pytest

from pagemill.documents.inspect import DocumentInfo
from pagemill.domain import SourceKind
from tests.conftest import SAMPLES
from tests.support.factories import add_job

# Recent costs a page, three pages each: means 0.000002 (text layer) and 0.00004 (OCR);
# a blank page (None) costs nothing and leaves the mean alone.
HISTORY: dict[str, list[str | None]] = {
    "textlayer": ["0.00000100", "0.00000200", "0.00000300"],
    "rapidocr": ["0.00003000", None, "0.00004000", "0.00005000"],
}
TEXT_LAYER_MEAN = Decimal("0.00000200")
OCR_MEAN = Decimal("0.00004000")


@pytest.fixture()
def history(db: str) -> Iterator[None]:
    from pagemill.clients.repository import create_client
    from pagemill.db.session import session_scope

    with session_scope() as session:
        client, _ = create_client(session, "history")
        for engine, costs in HISTORY.items():
            add_job(
                session,
                client.id,
                [
                    {"engine": engine, "cost_usd": Decimal(cost or 0), "blank": cost is None}
                    for cost in costs
                ],
            )
    yield


def quoted(api: httpx.Client, path: Path) -> Decimal:
    response = api.post(
        "/v1/jobs",
        files={"file": (path.name, path.read_bytes(), "application/pdf")},
        data={"engine": "auto"},
    )
    assert response.status_code == 202, response.text
    return Decimal(response.json()["quote_usd"])


def mixed_pdf(path: Path) -> Path:
    """The three born-digital pages of the sample invoice, then the scanned sentence."""
    with (
        pymupdf.open(str(SAMPLES / "invoice-multipage.pdf")) as born_digital,
        pymupdf.open(str(SAMPLES / "scanned-sentence.pdf")) as scan,
    ):
        born_digital.insert_pdf(scan)
        born_digital.save(str(path))
    return path


def test_born_digital_pages_are_quoted_at_the_text_layer_mean(
    api: httpx.Client, history: None
) -> None:
    assert quoted(api, SAMPLES / "invoice-multipage.pdf") == 3 * TEXT_LAYER_MEAN


def test_scanned_pages_are_quoted_at_the_ocr_mean(api: httpx.Client, history: None) -> None:
    assert quoted(api, SAMPLES / "scanned-sentence.pdf") == OCR_MEAN


def test_a_mixed_document_is_quoted_page_by_page(
    api: httpx.Client, history: None, tmp_path: Path
) -> None:
    assert quoted(api, mixed_pdf(tmp_path / "mixed.pdf")) == 3 * TEXT_LAYER_MEAN + OCR_MEAN


def test_a_blank_page_is_free(api: httpx.Client, history: None, tmp_path: Path) -> None:
    # Found blank before OCR runs, as prepare and the quality stage will find it.
    path = tmp_path / "with-blank.pdf"
    with pymupdf.open(str(SAMPLES / "invoice-multipage.pdf")) as document:
        document.new_page()
        document.save(str(path))
    assert quoted(api, path) == 3 * TEXT_LAYER_MEAN


def test_pages_inspection_could_not_tell_are_quoted_as_ocr(history: None) -> None:
    from pagemill.accounting.quote import quote_usd
    from pagemill.db.session import session_scope
    from pagemill.documents.facts import TextLayerFacts
    from pagemill.settings import Settings

    measured = TextLayerFacts(
        text_chars=900, unreadable_chars=0, invisible_text_chars=0, image_coverage=0.0
    )
    # Page 2 was not measured (a heavy page), page 3 lies past the measuring budget.
    info = DocumentInfo(SourceKind.pdf, 3, page_facts=(measured, None))
    settings = Settings()
    with session_scope() as session:
        auto = quote_usd(session, settings, info, [1, 2, 3], "auto", "rapidocr")
        text_layer = quote_usd(session, settings, info, [2, 3], "textlayer", "rapidocr")
        ocr = quote_usd(session, settings, info, [1], "rapidocr", "rapidocr")
    assert auto == TEXT_LAYER_MEAN + 2 * OCR_MEAN
    assert text_layer == 2 * TEXT_LAYER_MEAN
    assert ocr == OCR_MEAN


def test_an_engine_with_no_history_is_quoted_at_the_fallback(db: str) -> None:
    from pagemill.accounting.quote import quote_usd
    from pagemill.db.session import session_scope
    from pagemill.settings import Settings

    settings = Settings(device_price_usd_per_hour=3.6, quote_fallback_seconds_per_page=5.0)
    info = DocumentInfo(SourceKind.png, 2)
    with session_scope() as session:
        quote = quote_usd(session, settings, info, [1, 2], "auto", "rapidocr")
    assert quote == Decimal("0.01000000")
