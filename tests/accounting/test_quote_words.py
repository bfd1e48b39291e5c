"""Text layer pages quoted by their words, the share of their rows holding lines side by
side and the paths they draw (pagemill.documents.facts): what the layout analysis
places and goes through, which a page's lines alone miss."""

from __future__ import annotations

import math
from decimal import Decimal
from pathlib import Path

import httpx
import pymupdf
import pytest

from pagemill.accounting.cost_model import CostModels
from pagemill.accounting.quote import TEXT_LAYER_TERM_SETS, TEXT_LAYER_TERMS, text_layer_measures
from pagemill.documents.facts import (
    DRAWN_PATHS_FACT,
    SIDE_BY_SIDE_FACT,
    TEXT_LINES_FACT,
    WORDS_FACT,
    read_text_layer,
    text_layer_facts,
)
from pagemill.domain import SourceKind
from tests.accounting.test_quote import quoted
from tests.accounting.test_quote_measures import USD, add_history, prose_and_table_pdf
from tests.conftest import SAMPLES

# Text layer pages whose cost rises with the root of their words, their share of rows
# side by side and their paths, each apart from the others.
INTERCEPT = 0.0000015
WORD_ROOT_SLOPE = 0.0000002
SIDE_BY_SIDE_SLOPE = 0.000001
PATH_SLOPE = 0.000000005


def cost(words: int, share: float, paths: int) -> float:
    return (
        INTERCEPT
        + WORD_ROOT_SLOPE * math.sqrt(words)
        + SIDE_BY_SIDE_SLOPE * share
        + PATH_SLOPE * paths
    )


def ruled_pdf(path: Path, words_a_line: int, lines: int, rulings: int) -> Path:
    """One page: `lines` lines of `words_a_line` words, and `rulings` lines drawn under
    them, each its own path."""
    document = pymupdf.open()
    page = document.new_page(width=595, height=842)
    for line in range(lines):
        text = " ".join(f"w{line}x{word}" for word in range(words_a_line))
        page.insert_text((72, 80 + 14 * line), text, fontsize=9)
    for ruling in range(rulings):
        y = 80 + 3 * ruling
        page.draw_line((60, y), (540, y), width=0.5)
    document.save(str(path))
    document.close()
    return path


def test_words_and_paths_are_counted(tmp_path: Path) -> None:
    path = ruled_pdf(tmp_path / "ruled.pdf", words_a_line=7, lines=20, rulings=30)
    with pymupdf.open(str(path)) as document:
        page = document[0]
        facts = text_layer_facts(page)
        assert facts.words == 7 * 20 == len(page.get_text("words"))
        assert facts.drawn_paths == 30
        assert read_text_layer(page).lines.words == facts.words


def test_a_page_of_cells_counts_its_words_as_get_text_does(tmp_path: Path) -> None:
    path = prose_and_table_pdf(tmp_path / "table.pdf", 10, 12)
    with pymupdf.open(str(path)) as document:
        page = document[0]
        assert text_layer_facts(page).words == len(page.get_text("words"))
        assert text_layer_facts(page).drawn_paths == 0


def test_paths_are_not_listed_past_the_content_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pagemill.documents import facts

    monkeypatch.setattr(facts, "DRAWN_PATHS_MAX_CONTENT_BYTES", 100)
    path = ruled_pdf(tmp_path / "ruled.pdf", words_a_line=7, lines=20, rulings=30)
    with pymupdf.open(str(path)) as document:
        measured = text_layer_facts(document[0])
    assert measured.drawn_paths is None
    assert measured.words == 7 * 20  # the text is still read


def history(count: int = 12) -> list[dict[str, object]]:
    """Pages whose words, share and paths vary apart, with the lines to match."""
    pages: list[dict[str, object]] = []
    for n in range(1, count + 1):
        words, share, paths = 40 * n * n, (n * 5 % 12) / 12, (n * 7 % 11) * 30
        pages.append(
            {
                "cost_usd": Decimal(repr(cost(words, share, paths))).quantize(USD),
                "facts": {
                    TEXT_LINES_FACT: 4 * n * n,
                    SIDE_BY_SIDE_FACT: share,
                    WORDS_FACT: words,
                    DRAWN_PATHS_FACT: paths,
                },
            }
        )
    return pages


def test_pages_are_quoted_by_their_words_share_and_paths(
    api: httpx.Client, db: str, tmp_path: Path
) -> None:
    add_history("textlayer", history())
    plain = ruled_pdf(tmp_path / "plain.pdf", words_a_line=8, lines=30, rulings=0)
    ruled = ruled_pdf(tmp_path / "ruled.pdf", words_a_line=8, lines=30, rulings=200)
    for path in (plain, ruled):
        with pymupdf.open(str(path)) as document:
            measured = text_layer_facts(document[0])
        assert measured.words is not None and measured.drawn_paths is not None
        expected = Decimal(
            repr(cost(measured.words, measured.side_by_side_share or 0, measured.drawn_paths))
        ).quantize(USD)
        assert abs(quoted(api, path) - expected) <= Decimal("0.00000005")
    # The same words and rows: the drawn paths make the page dearer.
    assert quoted(api, ruled) > quoted(api, plain)


def test_a_history_without_words_or_paths_prices_by_the_lines() -> None:
    points = [
        (text_layer_measures(4 * n * n, (n * 5 % 12) / 12), 1 + 0.2 * 2 * n + (n * 5 % 12) / 12)
        for n in range(1, 13)
    ]
    models = CostModels(TEXT_LAYER_TERMS, points, TEXT_LAYER_TERM_SETS)
    model = models.for_page(text_layer_measures(100, 0.5, words=700, paths=30))
    assert model is not None
    assert model.terms == ("sqrt_text_lines", "side_by_side_share")
    assert model.slopes == pytest.approx((0.2, 1.0))


def test_a_page_without_words_or_paths_prices_by_the_lines() -> None:
    points = [(measures, 1.0 + measures["sqrt_words"] / 10) for measures in _full_points()]
    models = CostModels(TEXT_LAYER_TERMS, points, TEXT_LAYER_TERM_SETS)
    assert models.for_page(text_layer_measures(100, 0.5, words=700, paths=30)) is not None
    model = models.for_page(text_layer_measures(100, 0.5))
    assert model is not None and "sqrt_words" not in model.terms


def _full_points() -> list[dict[str, float]]:
    return [
        dict(text_layer_measures(4 * n * n, (n * 5 % 12) / 12, 40 * n * n, (n * 7 % 11) * 30))
        for n in range(1, 13)
    ]


def test_prepare_records_the_words_and_paths_inspection_counts() -> None:
    from pagemill.documents.inspect import inspect_document
    from worker.render import render_pages

    path = SAMPLES / "invoice-multipage.pdf"
    info = inspect_document(path)
    rendered = list(render_pages(path, SourceKind.pdf, [1, 2, 3], 150, 50_000_000))
    for number, page in zip((1, 2, 3), rendered, strict=True):
        inspected = info.facts_of(number)
        assert inspected is not None
        assert page.words == inspected.words
        assert page.drawn_paths == inspected.drawn_paths
        assert page.text_lines == inspected.text_lines
    assert all(page.words for page in rendered)
