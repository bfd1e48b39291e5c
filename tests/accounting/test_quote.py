"""Quotes that predict: each page at the recent mean cost of the engine it will most
likely be routed to, against real Postgres and through the real submit path."""

from __future__ import annotations

from collections.abc import Callable, Iterator
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


def test_pages_inspection_did_not_measure_are_quoted_like_the_measured_ones(
    history: None,
) -> None:
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
    nothing_measured = DocumentInfo(SourceKind.pdf, 3)
    with session_scope() as session:
        auto = quote_usd(session, settings, info, [1, 2, 3], "auto", "rapidocr")
        text_layer = quote_usd(session, settings, info, [2, 3], "textlayer", "rapidocr")
        ocr = quote_usd(session, settings, info, [1], "rapidocr", "rapidocr")
        unknown = quote_usd(session, settings, nothing_measured, [1, 2], "auto", "rapidocr")
    # Pages 2 and 3 like page 1, the one measured: a document's pages are mostly alike.
    assert auto == 3 * TEXT_LAYER_MEAN
    assert text_layer == 2 * TEXT_LAYER_MEAN
    assert ocr == OCR_MEAN
    # With no page measured, each is quoted as OCR would read it: the dearer guess.
    assert unknown == 2 * OCR_MEAN


def test_an_engine_with_no_history_is_quoted_at_the_fallback(db: str) -> None:
    from pagemill.accounting.quote import quote_usd
    from pagemill.db.session import session_scope
    from pagemill.settings import Settings

    settings = Settings(device_price_usd_per_hour=3.6, quote_fallback_seconds_per_page=5.0)
    info = DocumentInfo(SourceKind.png, 2)
    with session_scope() as session:
        quote = quote_usd(session, settings, info, [1, 2], "auto", "rapidocr")
    assert quote == Decimal("0.01000000")


# OCR pages whose cost rises with their ink, as a scan's does with the text it holds:
# cost = LINE_INTERCEPT + LINE_SLOPE * ink, over enough pages for the line to be trusted.
LINE_INTERCEPT = Decimal("0.00002000")
LINE_SLOPE = Decimal("0.00200000")
HISTORY_INKS = [Decimal(f"0.{n:03d}") for n in range(4, 44, 3)]


def add_ocr_history(inks: list[Decimal], cost_of: Callable[[Decimal], Decimal]) -> None:
    from pagemill.clients.repository import create_client
    from pagemill.db.session import session_scope

    with session_scope() as session:
        client, _ = create_client(session, "ink-history")
        add_job(
            session,
            client.id,
            [
                {
                    "engine": "rapidocr",
                    "cost_usd": cost_of(ink),
                    "facts": {"ink_fraction": float(ink)},
                }
                for ink in inks
            ],
        )


def on_the_line(ink: Decimal) -> Decimal:
    return LINE_INTERCEPT + LINE_SLOPE * ink


def dense_scan_pdf(path: Path) -> Path:
    """The scanned invoice (a full page of text) as an image-only PDF page."""
    with pymupdf.open() as document:
        page = document.new_page(width=612, height=792)
        page.insert_image(page.rect, filename=str(SAMPLES / "scanned-invoice.png"))
        document.save(str(path))
    return path


def measured_ink(path: Path) -> Decimal:
    from pagemill.documents.facts import ink_fraction

    with pymupdf.open(str(path)) as document:
        return Decimal(repr(ink_fraction(document.load_page(0))))


def test_a_dense_scan_is_quoted_above_a_sparse_one(
    api: httpx.Client, db: str, tmp_path: Path
) -> None:
    add_ocr_history(HISTORY_INKS, on_the_line)
    sparse, dense = SAMPLES / "scanned-sentence.pdf", dense_scan_pdf(tmp_path / "dense.pdf")
    sparse_quote, dense_quote = quoted(api, sparse), quoted(api, dense)
    # The page's ink as prepare will record it, priced on the line the history draws.
    assert sparse_quote == on_the_line(measured_ink(sparse)).quantize(Decimal("1e-8"))
    assert dense_quote == on_the_line(measured_ink(dense)).quantize(Decimal("1e-8"))
    assert dense_quote > Decimal("1.5") * sparse_quote


def test_prepare_records_the_ink_inspection_measures(tmp_path: Path) -> None:
    from pagemill.documents.inspect import inspect_document
    from worker.render import render_pages

    dense = dense_scan_pdf(tmp_path / "dense.pdf")
    for path, kind in [(dense, SourceKind.pdf), (SAMPLES / "scanned-invoice.png", SourceKind.png)]:
        [page] = render_pages(path, kind, [1], 150, 50_000_000)
        assert page.ink_fraction is not None and page.ink_fraction > 0
        assert inspect_document(path).ink_of(1) == page.ink_fraction


def ocr_quote(ink: float | None) -> Decimal:
    from pagemill.accounting.quote import quote_usd
    from pagemill.db.session import session_scope
    from pagemill.settings import Settings

    info = DocumentInfo(SourceKind.png, 1, page_ink=(ink,))
    with session_scope() as session:
        return quote_usd(session, Settings(), info, [1], "auto", "rapidocr")


def mean_of(costs: list[Decimal]) -> Decimal:
    return (sum(costs, Decimal(0)) / len(costs)).quantize(Decimal("1e-8"))


def test_too_few_priced_pages_with_ink_fall_back_to_the_mean(db: str) -> None:
    inks = HISTORY_INKS[:5]
    add_ocr_history(inks, on_the_line)
    assert ocr_quote(0.04) == mean_of([on_the_line(ink) for ink in inks])


def test_cost_falling_with_ink_falls_back_to_the_mean(db: str) -> None:
    def falling(ink: Decimal) -> Decimal:
        return Decimal("0.0001") - LINE_SLOPE * ink

    add_ocr_history(HISTORY_INKS, falling)
    assert ocr_quote(0.04) == mean_of([falling(ink) for ink in HISTORY_INKS])


def test_a_price_at_or_below_zero_falls_back_to_the_mean(db: str) -> None:
    def steep(ink: Decimal) -> Decimal:
        return Decimal("-0.00001") + LINE_SLOPE * ink

    inks = HISTORY_INKS[2:]  # all above 0.005, so every recorded cost is positive
    add_ocr_history(inks, steep)
    mean = mean_of([steep(ink) for ink in inks])
    assert ocr_quote(0.001) == mean  # the line gives -0.000008 here
    assert ocr_quote(0.03) == steep(Decimal("0.03"))


def test_a_page_without_ink_is_quoted_at_the_mean(db: str) -> None:
    add_ocr_history(HISTORY_INKS, on_the_line)
    assert ocr_quote(None) == mean_of([on_the_line(ink) for ink in HISTORY_INKS])
