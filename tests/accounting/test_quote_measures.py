"""The quote's models of cost against what a page holds: the text layer priced by its
lines, OCR by its ink and the pixels it reads, and the fit that gives way to fewer terms
when the history cannot support them."""

from __future__ import annotations

import math
from decimal import Decimal
from pathlib import Path

import httpx
import pymupdf
import pytest

from pagemill.accounting.cost_model import MIN_FIT_PAGES, CostModels, fit_cost_model
from pagemill.domain import SourceKind
from tests.accounting.test_quote import quoted
from tests.conftest import SAMPLES
from tests.support.factories import add_job

USD = Decimal("1e-8")


def add_history(engine: str, pages: list[dict[str, object]]) -> None:
    from pagemill.clients.repository import create_client
    from pagemill.db.session import session_scope

    with session_scope() as session:
        client, _ = create_client(session, f"{engine}-history")
        add_job(session, client.id, [{"engine": engine, **page} for page in pages])


# Text layer pages whose cost rises with the root of their lines.
TEXT_INTERCEPT = Decimal("0.00000200")
TEXT_SLOPE = Decimal("0.00000030")


def text_cost(lines: int) -> Decimal:
    return (TEXT_INTERCEPT + TEXT_SLOPE * Decimal(math.sqrt(lines))).quantize(USD)


def measured_lines(path: Path) -> list[int]:
    from pagemill.documents.facts import text_line_count

    with pymupdf.open(str(path)) as document:
        return [text_line_count(page) for page in document]


def test_born_digital_pages_are_quoted_by_their_lines(api: httpx.Client, db: str) -> None:
    history_lines = [4 * n * n for n in range(1, 13)]  # roots 2, 4, ... 24
    add_history(
        "textlayer",
        [{"cost_usd": text_cost(n), "facts": {"text_lines": n}} for n in history_lines],
    )
    path = SAMPLES / "invoice-multipage.pdf"
    lines = measured_lines(path)
    assert len(set(lines)) > 1  # a short page and a long one: the lines tell them apart
    expected = sum(
        (TEXT_INTERCEPT + TEXT_SLOPE * Decimal(repr(math.sqrt(n))) for n in lines), Decimal(0)
    ).quantize(USD)
    # The history's costs are rounded to the stored precision; the fit is as near.
    assert abs(quoted(api, path) - expected) <= Decimal("0.00000005")


# Tables cost the text layer engine apart from their lines: each is read again for its grid.
SIDE_BY_SIDE_SLOPE = Decimal("0.00000150")


def prose_and_table_pdf(path: Path, prose_lines: int, table_rows: int) -> Path:
    """One page: prose lines, then a table of three cells a row."""
    document = pymupdf.open()
    page = document.new_page(width=595, height=842)
    y = 80.0
    for line in range(prose_lines):
        page.insert_text((72, y), f"Line {line} of running prose across the page", fontsize=10)
        y += 14
    for row in range(table_rows):
        for cell, x in enumerate((72, 260, 420)):
            page.insert_text((x, y), f"cell {row}.{cell}: {row * cell} EUR", fontsize=10)
        y += 14
    document.save(str(path))
    document.close()
    return path


def test_rows_of_cells_stand_side_by_side_and_prose_does_not(tmp_path: Path) -> None:
    from pagemill.documents.facts import text_lines

    prose, rows = 10, 12
    with pymupdf.open(str(prose_and_table_pdf(tmp_path / "t.pdf", prose, rows))) as document:
        measured = text_lines(document[0])
    assert measured.count == prose + 3 * rows
    assert measured.side_by_side_share == pytest.approx(rows / (prose + rows))
    with pymupdf.open(str(prose_and_table_pdf(tmp_path / "p.pdf", prose, 0))) as document:
        assert text_lines(document[0]).side_by_side_share == 0


def test_pages_with_lines_side_by_side_are_quoted_above_prose(
    api: httpx.Client, db: str, tmp_path: Path
) -> None:
    from pagemill.documents.facts import text_lines

    def cost(lines: int, share: float) -> Decimal:
        return (
            TEXT_INTERCEPT
            + TEXT_SLOPE * Decimal(repr(math.sqrt(lines)))
            + SIDE_BY_SIDE_SLOPE * Decimal(repr(share))
        )

    # Lines and share apart: the share of page n does not follow its lines.
    history = [(4 * n * n, (n * 5 % 12) / 12) for n in range(1, 13)]
    add_history(
        "textlayer",
        [
            {
                "cost_usd": cost(n, share).quantize(USD),
                "facts": {"text_lines": n, "side_by_side_share": share},
            }
            for n, share in history
        ],
    )
    prose = prose_and_table_pdf(tmp_path / "prose.pdf", 40, 0)
    table = prose_and_table_pdf(tmp_path / "table.pdf", 10, 10)
    for path in (prose, table):
        with pymupdf.open(str(path)) as document:
            measured = text_lines(document[0])
        expected = cost(measured.count, measured.side_by_side_share).quantize(USD)
        assert abs(quoted(api, path) - expected) <= Decimal("0.00000005")
    # As many lines, but half the rows hold cells: dearer.
    assert quoted(api, table) > quoted(api, prose)


# OCR pages whose cost rises with their ink and, apart from it, with the root of their
# pixels.
OCR_INTERCEPT = 0.00002
OCR_INK_SLOPE = 0.002
OCR_MEGAPIXEL_SLOPE = 0.000004


def ocr_cost(ink: float, pixels: int) -> Decimal:
    return Decimal(
        repr(OCR_INTERCEPT + OCR_INK_SLOPE * ink + OCR_MEGAPIXEL_SLOPE * math.sqrt(pixels / 1e6))
    ).quantize(USD)


def ocr_history(sizes: list[tuple[int, int]]) -> list[dict[str, object]]:
    pages: list[dict[str, object]] = []
    for index in range(12):
        ink = 0.005 + 0.003 * index
        width, height = sizes[index % len(sizes)]
        pages.append(
            {
                "cost_usd": ocr_cost(ink, width * height),
                "facts": {"ink_fraction": ink},
                "image_width_px": width,
                "image_height_px": height,
            }
        )
    return pages


def image_quote(ink: float, size: tuple[float, float] | None) -> Decimal:
    from pagemill.accounting.quote import quote_usd
    from pagemill.db.session import session_scope
    from pagemill.documents.inspect import DocumentInfo
    from pagemill.settings import Settings

    info = DocumentInfo(SourceKind.png, 1, page_ink=(ink,), page_sizes=(size,))
    with session_scope() as session:
        return quote_usd(session, Settings(), info, [1], "auto", "rapidocr")


def test_a_scan_is_quoted_by_its_ink_and_its_pixels(db: str) -> None:
    add_history("rapidocr", ocr_history([(1240, 1754), (2480, 3508), (3000, 4000)]))
    small, large = image_quote(0.03, (1240, 1754)), image_quote(0.03, (3000, 4000))
    assert abs(small - ocr_cost(0.03, 1240 * 1754)) <= Decimal("0.00000002")
    assert abs(large - ocr_cost(0.03, 3000 * 4000)) <= Decimal("0.00000002")
    assert large > small


def test_pixels_that_never_vary_leave_the_quote_to_the_ink(db: str) -> None:
    # Every page of the history the same size: pixels cannot be told apart from the
    # intercept, so the line through ink alone prices the page.
    add_history("rapidocr", ocr_history([(1240, 1754)]))
    expected = ocr_cost(0.03, 1240 * 1754)
    assert abs(image_quote(0.03, (3000, 4000)) - expected) <= Decimal("0.00000002")


def test_prepare_records_the_lines_inspection_counts() -> None:
    from pagemill.documents.inspect import inspect_document
    from worker.render import render_pages

    path = SAMPLES / "invoice-multipage.pdf"
    info = inspect_document(path)
    rendered = list(render_pages(path, SourceKind.pdf, [1, 2, 3], 150, 50_000_000))
    counted = [page.text_lines for page in rendered]
    assert counted == [info.facts_of(n).text_lines for n in (1, 2, 3)]  # type: ignore[union-attr]
    assert all(lines for lines in counted)
    shares = [page.side_by_side_share for page in rendered]
    assert shares == [info.facts_of(n).side_by_side_share for n in (1, 2, 3)]  # type: ignore[union-attr]
    assert any(shares)  # the invoice's line items stand side by side


def points(cost_of: object, count: int = MIN_FIT_PAGES) -> list[tuple[dict[str, float], float]]:
    assert callable(cost_of)
    return [
        ({"ink": 0.01 * n, "megapixels": float(1 + n % 3)}, cost_of(0.01 * n, float(1 + n % 3)))
        for n in range(1, count + 1)
    ]


def test_the_fit_finds_each_term_apart() -> None:
    model = fit_cost_model(("ink", "megapixels"), points(lambda ink, mp: 1 + 20 * ink + 3 * mp))
    assert model is not None
    assert model.intercept == pytest.approx(1)
    assert model.slopes == pytest.approx((20, 3))


def test_a_falling_term_is_given_up_for_the_others() -> None:
    history = points(lambda ink, mp: 10 + 20 * ink - 0.5 * mp)
    assert fit_cost_model(("ink", "megapixels"), history) is None
    model = CostModels(("ink", "megapixels"), history).for_page({"ink": 0.1, "megapixels": 2})
    assert model is not None and model.terms == ("ink",)


def test_too_few_pages_fit_nothing() -> None:
    history = points(lambda ink, mp: 1 + 20 * ink + 3 * mp, count=MIN_FIT_PAGES - 1)
    assert CostModels(("ink", "megapixels"), history).for_page({"ink": 0.1}) is None
