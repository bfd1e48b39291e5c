"""A long document is measured at a sample of its pages at submit, and the quote prices
the pages left at the mean of those measured, never as OCR would read them."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import httpx
import pymupdf

from pagemill.documents.facts import TextLayerFacts
from pagemill.documents.inspect import (
    MEASURED_PAGES_MAX,
    DocumentInfo,
    inspect_document,
    measured_page_indexes,
)
from pagemill.domain import SourceKind
from tests.accounting.test_quote import quoted
from tests.accounting.test_quote_measures import add_history, text_cost

A4 = (595.0, 842.0)
USD = Decimal("1e-8")


def test_a_long_document_is_measured_at_pages_spread_from_first_to_last() -> None:
    assert measured_page_indexes(5) == frozenset(range(5))
    sampled = measured_page_indexes(25)
    assert len(sampled) == MEASURED_PAGES_MAX
    assert {0, 24} <= sampled
    gaps = sorted(b - a for a, b in zip(sorted(sampled), sorted(sampled)[1:], strict=False))
    assert gaps[-1] - gaps[0] <= 1  # evenly spread


def letter_pdf(path: Path, pages: int) -> Path:
    document = pymupdf.open()
    for number in range(1, pages + 1):
        page = document.new_page(width=A4[0], height=A4[1])
        for line in range(12):
            page.insert_text((72, 80 + 14 * line), f"Page {number}, line {line} of a letter")
    document.save(str(path))
    document.close()
    return path


def test_inspection_measures_a_sample_of_a_long_document(tmp_path: Path) -> None:
    info = inspect_document(letter_pdf(tmp_path / "long.pdf", 20))
    assert info.page_count == 20
    measured = [n for n in range(1, 21) if info.facts_of(n) is not None]
    assert len(measured) == MEASURED_PAGES_MAX
    assert measured[0] == 1 and measured[-1] == 20
    assert all(info.facts_of(n).text_lines == 12 for n in measured)  # type: ignore[union-attr]


def test_a_long_document_is_quoted_as_if_every_page_were_measured(
    api: httpx.Client, db: str, tmp_path: Path
) -> None:
    add_history(
        "textlayer",
        [{"cost_usd": text_cost(n), "facts": {"text_lines": n}} for n in (4, 16, 36, 64, 100)],
    )
    short, long = letter_pdf(tmp_path / "short.pdf", 4), letter_pdf(tmp_path / "long.pdf", 20)
    # Each total is rounded once to the stored precision.
    assert abs(quoted(api, long) - quoted(api, short) * 5) <= 5 * USD


def test_selected_pages_left_unmeasured_take_the_documents_measured_mean(db: str) -> None:
    from pagemill.accounting.quote import quote_usd
    from pagemill.db.session import session_scope
    from pagemill.settings import Settings

    add_history(
        "textlayer",
        [{"cost_usd": text_cost(n), "facts": {"text_lines": n}} for n in (4, 16, 36, 64, 100)],
    )
    letter = TextLayerFacts(
        text_chars=400,
        unreadable_chars=0,
        invisible_text_chars=0,
        image_coverage=0.0,
        text_lines=12,
        side_by_side_share=0.0,
    )
    info = DocumentInfo(SourceKind.pdf, 3, page_facts=(letter, None, None), page_sizes=(A4,) * 3)
    with session_scope() as session:
        first = quote_usd(session, Settings(), info, [1], "auto", "rapidocr")
        # Pages 2 and 3 were not measured: priced as page 1 of the same document, which
        # the text layer reads, not as OCR would read a page.
        rest = quote_usd(session, Settings(), info, [2, 3], "auto", "rapidocr")
    assert first > 0
    assert abs(rest - first * 2) <= 2 * USD
