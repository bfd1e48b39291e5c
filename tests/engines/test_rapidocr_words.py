"""Word boxes from rapidocr's results, given as rapidocr gives them (no OCR run)."""

from __future__ import annotations

from typing import Any

from worker.engines.ocr_layout import page_markdown
from worker.engines.rapidocr import _line

HEIGHT = 24


def quad(x0: float, y0: float, x1: float) -> list[list[float]]:
    return [[x0, y0], [x1, y0], [x1, y0 + HEIGHT], [x0, y0 + HEIGHT]]


def recognised(text: str, words: list[tuple[str, float, float]], y0: float) -> Any:
    """A line as rapidocr returns it: its text, its box and its words with their boxes."""
    word_results = [(word, 0.99, quad(x0, y0, x1)) for word, x0, x1 in words]
    return _line(text, quad(words[0][1] - 4, y0, words[-1][2] + 4), word_results, 0.99)


def test_a_cut_the_recogniser_made_without_a_space_keeps_two_cells_apart() -> None:
    # A noisy scan: the price and the VAT rate read as one word ("0,0021%"), though
    # rapidocr cut them into two words a line height apart, each in its column.
    header = [
        recognised("Article", [("Article", 40, 110)], 100),
        recognised("Price", [("Price", 800, 850)], 100),
        recognised("VAT", [("VAT", 880, 912)], 100),
        recognised("Amount", [("Amount", 1000, 1066)], 100),
    ]
    first = [
        recognised("E103184", [("E103184", 40, 112)], 128),
        recognised("49,99 21%", [("49,99", 800, 850), ("21%", 880, 912)], 128),
        recognised("49,99", [("49,99", 1016, 1066)], 128),
    ]
    second = [
        recognised("E103560", [("E103560", 40, 112)], 156),
        recognised("0,0021%", [("0,00", 808, 850), ("21%", 880, 912)], 156),
        recognised("0,00", [("0,00", 1024, 1066)], 156),
    ]
    table = page_markdown([*header, *first, *second]).splitlines()
    assert table[0] == "| Article | Price | VAT | Amount |"
    assert table[-1] == "| E103560 | 0,00 | 21% | 0,00 |"


def test_a_word_cut_where_its_letters_stand_apart_is_joined_back() -> None:
    line = recognised(
        "Kvk nummer: 04080176",
        [("Kvk", 88, 127), ("num", 131, 176), ("mer:", 188, 241), ("04080176", 245, 354)],
        100,
    )
    assert line.text == "Kvk nummer: 04080176"
    assert [word.text for word in line.words] == ["Kvk", "nummer:", "04080176"]
    assert (line.words[1].box.x0, line.words[1].box.x1) == (131, 241)
