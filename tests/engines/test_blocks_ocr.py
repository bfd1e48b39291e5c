"""OCR lines to the blocks layer, on line boxes laid out as pages lay them out (no OCR run)."""

from __future__ import annotations

from pagemill.documents.blocks import BlockKind, PageBlocks
from tests.engines.test_ocr_layout import LINE_HEIGHT, line
from worker.engines.blocks_ocr import blocks_from_ocr_lines
from worker.engines.ocr_boxes import Box, Line, Word

DPI = 150
PT = 72 / DPI  # points per pixel at 150 dpi


def pts(*pixels: float) -> tuple[float, ...]:
    """Pixels at 150 dpi as the points the blocks give (to the hundredth)."""
    return tuple(round(px * PT, 2) for px in pixels)


def blocks(lines: list[Line], width_px: int = 1240, height_px: int = 1754) -> PageBlocks:
    return blocks_from_ocr_lines(lines, width_px, height_px, DPI, 3, "rapidocr")


def test_the_page_size_and_boxes_are_in_points_from_the_image_dpi() -> None:
    page = blocks([line("Thank you for your order.", 100, 300)])
    assert (page.page, page.engine) == (3, "rapidocr")
    assert (page.width_pt, page.height_pt) == (round(1240 * PT, 2), round(1754 * PT, 2))
    [block] = page.blocks
    assert block.kind is BlockKind.TEXT
    [text_line] = block.lines
    assert text_line.box == pts(100, 300, 100 + 250, 300 + LINE_HEIGHT)
    assert [w.text for w in text_line.words] == ["Thank", "you", "for", "your", "order."]
    assert text_line.words[1].box[0] == pts(160)[0]  # "Thank " is six characters of 10 px


def test_paragraphs_apart_are_blocks_apart_and_a_tall_line_is_a_heading() -> None:
    heading = Line(
        "Annual report", Box(40, 40, 400, 80), (Word("Annual report", Box(40, 40, 400, 80)),)
    )
    first = [line("the first paragraph runs", 40, 200), line("over two lines", 40, 228)]
    second = [line("a second paragraph after a gap", 40, 320)]
    page = blocks([heading, *first, *second])
    assert [(b.kind, b.text) for b in page.blocks] == [
        (BlockKind.HEADING, "Annual report"),
        (BlockKind.TEXT, "the first paragraph runs\nover two lines"),
        (BlockKind.TEXT, "a second paragraph after a gap"),
    ]
    assert page.blocks[1].box == pts(40, 200, 280, 228 + LINE_HEIGHT)


def test_a_table_comes_with_its_cells_their_rows_columns_and_boxes() -> None:
    rows = [
        ("Description", "Qty", "Price", "Amount"),
        ("Office chair", "1", "70.00", "70.00"),
        ("Desk lamp", "2", "15.00", "30.00"),
    ]
    xs = (40, 400, 520, 660)
    lines = [
        line(cell, x, 300 + 30 * r)
        for r, row in enumerate(rows)
        for cell, x in zip(row, xs, strict=True)
    ]
    lines.append(line("Thank you for your order.", 40, 500))
    page = blocks(lines)
    kinds = [b.kind for b in page.blocks]
    assert kinds == [BlockKind.TABLE, *[BlockKind.TABLE_CELL] * 12, BlockKind.TEXT]
    table, *cells, closing = page.blocks
    assert table.box == pts(40, 300, 720, 360 + LINE_HEIGHT)
    grid = {(cell.row, cell.column): cell for cell in cells}
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            assert grid[(r, c)].text == text
    assert grid[(1, 0)].box == pts(40, 330, 160, 330 + LINE_HEIGHT)
    assert closing.text == "Thank you for your order."


def test_two_cells_read_as_one_line_give_two_cells_with_their_own_words() -> None:
    lines = []
    for r, (name, qty, disc, tax) in enumerate(
        [("Item", "Qty", "Disc.", "Tax"), ("Chair", "1", "0.00", "15%")]
    ):
        y = 300 + 30 * r
        first, second = line(disc, 500, y), line(tax, 580, y)
        merged = Line(
            f"{disc} {tax}",
            Box(first.box.x0, y, second.box.x1, y + LINE_HEIGHT),
            first.words + second.words,
        )
        lines += [line(name, 40, y), line(qty, 300, y), merged]
    cells = {(b.row, b.column): b for b in blocks(lines).blocks if b.kind is BlockKind.TABLE_CELL}
    assert cells[(1, 2)].text == "0.00" and cells[(1, 3)].text == "15%"
    assert cells[(1, 3)].box[0] == pts(580)[0]


def test_boxes_are_where_the_recogniser_put_them_on_a_tilted_page() -> None:
    # Every line rises 3 px over its 300 px: grouping levels them, the boxes stay as read.
    tilted = [
        Line(
            f"line number {i} of the page",
            Box(40, 100 + 30 * i, 340, 124 + 30 * i),
            (),
            slope=-0.01,
        )
        for i in range(3)
    ]
    [block] = blocks(tilted).blocks
    assert [ln.box for ln in block.lines] == [
        pts(40, 100 + 30 * i, 340, 124 + 30 * i) for i in range(3)
    ]


def test_the_recognisers_confidence_is_kept_and_an_empty_page_has_no_blocks() -> None:
    sure = Line(
        "Total 9.00",
        Box(40, 40, 140, 64),
        (Word("Total", Box(40, 40, 90, 64), 0.99), Word("9.00", Box(100, 40, 140, 64), 0.71)),
        confidence=0.85,
    )
    [block] = blocks([sure]).blocks
    assert block.lines[0].confidence == 0.85
    assert [w.confidence for w in block.lines[0].words] == [0.99, 0.71]
    empty = blocks([])
    assert empty.blocks == [] and empty.width_pt == round(1240 * PT, 2)
