"""A born-digital page's text layer to the blocks layer, on pages drawn with PyMuPDF."""

from __future__ import annotations

import pymupdf
import pytest

from pagemill.documents.blocks import BlockKind, PageBlocks
from worker.engines.blocks_textlayer import (
    LayoutRegion,
    blocks_from_text_layer,
    layout_regions,
)

BODY = [
    "The first paragraph of the page is set in ten point type",
    "and runs on over a second line of the same size.",
]


def page_pdf(rotation: int = 0) -> bytes:
    with pymupdf.open() as document:
        page = document.new_page(width=595, height=842)
        page.insert_text((72, 90), "Quarterly report", fontsize=20)
        for index, text in enumerate(BODY):
            page.insert_text((72, 140 + 14 * index), text, fontsize=10)
        page.insert_text((72, 820), "ACME Ltd - page 1 of 2", fontsize=8)
        page.set_rotation(rotation)
        return document.tobytes()


def words_of(page: PageBlocks) -> dict[str, tuple[float, float, float, float]]:
    return {w.text: w.box for b in page.blocks for ln in b.lines for w in ln.words}


def test_words_lines_and_the_page_size_are_where_pymupdf_puts_them() -> None:
    pdf = page_pdf()
    page = blocks_from_text_layer(pdf, 4, "textlayer")
    assert (page.page, page.engine, page.width_pt, page.height_pt) == (4, "textlayer", 595, 842)
    with pymupdf.open(stream=pdf) as document:
        expected = {w[4]: w[:4] for w in document[0].get_text("words")}
    found = words_of(page)
    assert found.keys() == expected.keys()
    for text, box in expected.items():
        assert found[text] == pytest.approx(box, abs=0.01)
    body = next(b for b in page.blocks if "paragraph" in b.text)
    assert [ln.text for ln in body.lines] == BODY


def test_a_line_set_larger_than_the_body_text_is_a_heading() -> None:
    page = blocks_from_text_layer(page_pdf(), 1, "textlayer")
    kinds = {b.text: b.kind for b in page.blocks}
    assert kinds["Quarterly report"] is BlockKind.HEADING
    assert kinds["\n".join(BODY)] is BlockKind.TEXT
    # Smaller than the body is not a heading either.
    assert kinds["ACME Ltd - page 1 of 2"] is BlockKind.TEXT


def test_boxes_are_on_the_page_as_shown_when_it_is_rotated() -> None:
    # Turned 90 degrees clockwise: the heading drawn at the top left now stands at the
    # top right, running down; the shown page is 842 wide.
    page = blocks_from_text_layer(page_pdf(rotation=90), 1, "textlayer")
    assert (page.width_pt, page.height_pt) == (842, 595)
    x0, y0, x1, y1 = words_of(page)["Quarterly"]
    assert x0 > 842 - 100 and y0 == pytest.approx(72, abs=0.5)
    assert y1 - y0 > x1 - x0  # taller than wide: the word runs down the shown page


def test_layout_regions_give_blocks_their_kinds_and_order() -> None:
    regions = layout_regions(
        [
            {"index": 1, "class": "text", "bbox": (60, 120, 540, 160)},
            {"index": 0, "class": "section-header", "bbox": (60, 60, 540, 100)},
            {"index": 2, "class": "page-footer", "bbox": (60, 805, 540, 830)},
        ]
    )
    assert [r.kind for r in regions] == ["section-header", "text", "page-footer"]
    page = blocks_from_text_layer(page_pdf(), 1, "textlayer", regions)
    assert [(b.kind, b.text) for b in page.blocks] == [
        (BlockKind.HEADING, "Quarterly report"),
        (BlockKind.TEXT, "\n".join(BODY)),
        (BlockKind.FURNITURE, "ACME Ltd - page 1 of 2"),
    ]


ROWS = [("Item", "Qty", "Amount"), ("Chair", "1", "70.00"), ("Lamp", "2", "30.00")]


def ruled_table_pdf() -> bytes:
    with pymupdf.open() as document:
        page = document.new_page(width=595, height=842)
        xs, ys = (100, 250, 350, 450), (200, 220, 240, 260)
        for x in xs:
            page.draw_line((x, ys[0]), (x, ys[-1]))
        for y in ys:
            page.draw_line((xs[0], y), (xs[-1], y))
        for r, row in enumerate(ROWS):
            for c, text in enumerate(row):
                page.insert_text((xs[c] + 4, ys[r] + 14), text, fontsize=10)
        return document.tobytes()


def test_a_table_region_comes_with_its_cells() -> None:
    region = LayoutRegion("table", (100, 200, 450, 260))
    page = blocks_from_text_layer(ruled_table_pdf(), 1, "textlayer", [region])
    table, *cells = page.blocks
    assert table.kind is BlockKind.TABLE
    assert table.box == pytest.approx((100, 200, 450, 260), abs=1)
    assert {(c.row, c.column): c.text for c in cells} == {
        (r, c): text for r, row in enumerate(ROWS) for c, text in enumerate(row)
    }
    assert all(c.kind is BlockKind.TABLE_CELL for c in cells)
    # A cell's box is its words' box, on the page where PyMuPDF puts them.
    with pymupdf.open(stream=ruled_table_pdf()) as document:
        printed = next(w[:4] for w in document[0].get_text("words") if w[4] == "Chair")
    chair = next(c for c in cells if c.text == "Chair")
    assert chair.box == pytest.approx(printed, abs=0.01)


def test_a_page_with_no_text_has_no_blocks() -> None:
    with pymupdf.open() as document:
        document.new_page(width=300, height=400)
        page = blocks_from_text_layer(document.tobytes(), 1, "textlayer")
    assert (page.blocks, page.width_pt, page.height_pt) == ([], 300, 400)
