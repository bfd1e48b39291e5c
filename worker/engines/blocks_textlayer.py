"""The blocks layer of a born-digital page, from its text layer's words.

PyMuPDF gives every word with its box and the line and block it sits in; the lines'
font sizes tell headings from body text. Where the text layer engine ran its layout
model (pymupdf4llm), its regions are passed in and give the blocks, their kinds
(headings, tables, running headers and footers) and their reading order at no extra
cost; a table region's cells come from where its words stand (`blocks_grid`).
Without regions (the plain-text reading of a page too heavy for layout analysis, or a
caller with only the PDF), blocks are PyMuPDF's own and tables are not looked for.

PyMuPDF reports words on the page as drawn, before its /Rotate; boxes here are on the
page as shown (as it is rendered), which is also where the layout model's regions lie.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pymupdf

from pagemill.documents.blocks import Block, BlockKind, Box, Line, PageBlocks, Word
from worker.engines.blocks_grid import grid_cells

# A line whose font is this much larger than the page's body text is a heading, when its
# block is short: a heading is a few words on a line or two.
HEADING_SIZE_RATIO = 1.2
HEADING_MAX_LINES = 3
HEADING_MAX_WORDS = 15
# pymupdf4llm's layout classes, by what the blocks layer calls them.
_LAYOUT_KINDS = {
    "title": BlockKind.HEADING,
    "section-header": BlockKind.HEADING,
    "table": BlockKind.TABLE,
    "table-fallback": BlockKind.TABLE,
    "page-header": BlockKind.FURNITURE,
    "page-footer": BlockKind.FURNITURE,
}
# Words and lines are extracted as written: ligatures kept, whitespace kept, nothing
# outside the media box.
_TEXT_FLAGS = (
    pymupdf.TEXT_PRESERVE_LIGATURES | pymupdf.TEXT_PRESERVE_WHITESPACE | pymupdf.TEXT_MEDIABOX_CLIP
)


@dataclass(frozen=True)
class LayoutRegion:
    """One region of the layout model's reading: its class and box on the shown page."""

    kind: str
    box: Box


def layout_regions(page_boxes: Iterable[dict[str, Any]]) -> list[LayoutRegion]:
    """Regions from pymupdf4llm's `page_boxes` (a page chunk's), in its reading order."""
    ordered = sorted(page_boxes, key=lambda region: int(region.get("index", 0)))
    return [
        LayoutRegion(str(region["class"]), _as_box(region["bbox"]))
        for region in ordered
        if "bbox" in region and "class" in region
    ]


def blocks_from_text_layer(
    pdf_page: bytes,
    page_number: int,
    engine: str,
    layout: Sequence[LayoutRegion] | None = None,
) -> PageBlocks:
    """The blocks of the first page of `pdf_page` (a one-page PDF)."""
    with pymupdf.open(stream=pdf_page, filetype="pdf") as document:
        page = document.load_page(0)
        lines = _text_lines(page)
        body_size = _body_size(lines)
        if layout is None:
            blocks = _blocks_by_pymupdf(lines, body_size)
        else:
            blocks = _blocks_by_layout(lines, layout, body_size)
        return PageBlocks(
            page=page_number,
            width_pt=round(page.rect.width, 2),
            height_pt=round(page.rect.height, 2),
            engine=engine,
            blocks=blocks,
        )


# --- lines ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _TextLine:
    block: int  # PyMuPDF's block number
    line: Line
    size: float  # the largest font size on the line, points


def _text_lines(page: pymupdf.Page) -> list[_TextLine]:
    textpage = page.get_textpage(flags=_TEXT_FLAGS)
    shown = page.rotation_matrix
    sizes: dict[tuple[int, int], float] = {}
    for block in page.get_text("dict", textpage=textpage)["blocks"]:
        for line_no, line in enumerate(block.get("lines", ())):
            spans = line.get("spans", ())
            sizes[(block["number"], line_no)] = max((s["size"] for s in spans), default=0.0)
    grouped: dict[tuple[int, int], list[Word]] = defaultdict(list)
    for x0, y0, x1, y1, text, block_no, line_no, _ in page.get_text("words", textpage=textpage):
        box = _as_box(pymupdf.Rect(x0, y0, x1, y1) * shown)
        grouped[(block_no, line_no)].append(Word(text=text, box=box))
    return [_TextLine(key[0], _line(words), sizes.get(key, 0.0)) for key, words in grouped.items()]


def _line(words: Sequence[Word]) -> Line:
    return Line(
        text=" ".join(w.text for w in words), box=_union(w.box for w in words), words=list(words)
    )


def _body_size(lines: Sequence[_TextLine]) -> float:
    """The font size most of the page's characters are set in."""
    sizes = [line.size for line in lines for _ in range(len(line.line.text))]
    return statistics.median(sizes) if sizes else 0.0


# --- blocks --------------------------------------------------------------------------------


def _blocks_by_pymupdf(lines: Sequence[_TextLine], body_size: float) -> list[Block]:
    grouped: dict[int, list[_TextLine]] = defaultdict(list)
    for line in lines:
        grouped[line.block].append(line)
    return [_text_block(members, body_size, None) for members in grouped.values()]


def _blocks_by_layout(
    lines: Sequence[_TextLine],
    layout: Sequence[LayoutRegion],
    body_size: float,
) -> list[Block]:
    """One block a layout region, in the layout's reading order; lines outside every
    region (the model skips some stray text) keep PyMuPDF's blocks, after them."""
    members: list[list[_TextLine]] = [[] for _ in layout]
    strays: dict[int, list[_TextLine]] = defaultdict(list)
    for line in lines:
        index = _region_of(line.line.box, layout)
        if index is None:
            strays[line.block].append(line)
        else:
            members[index].append(line)
    blocks: list[Block] = []
    for region, region_lines in zip(layout, members, strict=True):
        if not region_lines:
            continue
        kind = _LAYOUT_KINDS.get(region.kind)
        if kind is BlockKind.TABLE:
            blocks.extend(_table_blocks(region.box, region_lines))
        else:
            blocks.append(_text_block(region_lines, body_size, kind))
    blocks.extend(_text_block(group, body_size, None) for group in strays.values())
    return blocks


def _text_block(lines: Sequence[_TextLine], body_size: float, kind: BlockKind | None) -> Block:
    if kind is None:
        kind = BlockKind.HEADING if _is_heading(lines, body_size) else BlockKind.TEXT
    return Block(
        kind=kind,
        box=_union(line.line.box for line in lines),
        lines=[line.line for line in lines],
    )


def _is_heading(lines: Sequence[_TextLine], body_size: float) -> bool:
    words = sum(len(line.line.words) for line in lines)
    return (
        body_size > 0
        and len(lines) <= HEADING_MAX_LINES
        and words <= HEADING_MAX_WORDS
        and min(line.size for line in lines) >= HEADING_SIZE_RATIO * body_size
        and any(ch.isalpha() for line in lines for ch in line.line.text)
    )


def _region_of(box: Box, layout: Sequence[LayoutRegion]) -> int | None:
    """The region holding the middle of `box` (the smallest, where regions nest)."""
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    holding = [i for i, r in enumerate(layout) if _contains(r.box, cx, cy)]
    return min(holding, key=lambda i: _area(layout[i].box), default=None)


# --- tables --------------------------------------------------------------------------------


def _table_blocks(region: Box, lines: Sequence[_TextLine]) -> list[Block]:
    """The table, then its cells with their row and column (worker.engines.blocks_grid)."""
    table = Block(
        kind=BlockKind.TABLE,
        box=_union([region, *(line.line.box for line in lines)]),
        lines=[line.line for line in lines],
    )
    return [table, *grid_cells([line.line for line in lines])]


# --- boxes ---------------------------------------------------------------------------------


def _as_box(rect: Any) -> Box:
    x0, y0, x1, y1 = (float(v) for v in tuple(rect)[:4])
    return (
        round(min(x0, x1), 2),
        round(min(y0, y1), 2),
        round(max(x0, x1), 2),
        round(max(y0, y1), 2),
    )


def _union(boxes: Iterable[Box]) -> Box:
    boxes = list(boxes)
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )


def _contains(box: Box, x: float, y: float) -> bool:
    return box[0] <= x <= box[2] and box[1] <= y <= box[3]


def _area(box: Box) -> float:
    return (box[2] - box[0]) * (box[3] - box[1])
