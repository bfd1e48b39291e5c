"""A born-digital table's cells from where its words stand (worker.engines.blocks_grid)."""

from __future__ import annotations

from pagemill.documents.blocks import Line, Word
from worker.engines.blocks_grid import grid_cells

CHAR_PT = 5.0  # 10 pt type: a character about 5 pt wide, a space as wide
WORD_HEIGHT_PT = 11.5


def line(text: str, x0: float, y0: float) -> Line:
    words, x = [], x0
    for word in text.split():
        width = CHAR_PT * len(word)
        words.append(Word(text=word, box=(x, y0, x + width, y0 + WORD_HEIGHT_PT)))
        x += width + CHAR_PT * 0.55  # a word space, as PyMuPDF's word boxes leave it
    box = (x0, y0, words[-1].box[2], y0 + WORD_HEIGHT_PT)
    return Line(text=text, box=box, words=words)


def cells_of(lines: list[Line]) -> dict[tuple[int | None, int | None], str]:
    return {(cell.row, cell.column): cell.text for cell in grid_cells(lines)}


def test_columns_are_cut_where_every_row_leaves_a_gap_wider_than_a_word_space() -> None:
    # "0.00 15.00%" is one PyMuPDF line: its two cells stand 8 pt apart, wider than a space.
    rows = [
        [
            line("Item", 40, 100),
            line("Qty", 200, 100),
            line("Disc.", 300, 100),
            line("Tax", 333, 100),
        ],
        [
            line("Office chair", 40, 120),
            line("1", 200, 120),
            line("0.00", 300, 120),
            line("15%", 333, 120),
        ],
    ]
    rows[1][2:] = [
        Line(
            text="0.00 15%",
            box=(300, 120, 348, 131.5),
            words=[*rows[1][2].words, Word(text="15%", box=(333, 120, 348, 131.5))],
        )
    ]
    assert cells_of([ln for row in rows for ln in row]) == {
        (0, 0): "Item",
        (0, 1): "Qty",
        (0, 2): "Disc.",
        (0, 3): "Tax",
        (1, 0): "Office chair",
        (1, 1): "1",
        (1, 2): "0.00",
        (1, 3): "15%",
    }


def test_a_description_running_past_its_column_stays_in_its_cell() -> None:
    lines = [line("Item", 40, 100), line("Qty", 200, 100), line("Amount", 300, 100)]
    for index in range(6):
        y = 120 + 20 * index
        text = "A long description running on" if index == 2 else f"Part {index}"
        lines += [line(text, 40, y), line("1", 210, y), line("9.00", 300, y)]
    cells = cells_of(lines)
    assert cells[(3, 0)] == "A long description running on"
    assert cells[(3, 1)] == "1"
    assert {column for (_, column) in cells} == {0, 1, 2}


def test_no_words_no_cells() -> None:
    assert grid_cells([]) == []
