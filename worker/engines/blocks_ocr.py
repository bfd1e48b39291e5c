"""The blocks layer of a page read by OCR, from the recogniser's line and word boxes.

Lines are grouped as the Markdown groups them (`ocr_layout`): tables first
(`ocr_tables`), then regions, then paragraphs within each region, so a block here is a
paragraph, a heading or a table of the page's Markdown. Grouping runs on the lines
levelled by the page's tilt, as the Markdown's does; the boxes given are the
recogniser's own, on the image as read, converted from pixels to points at its dpi.

A table's cells are the words the table finder put in each cell: it gives each cell's
text, and its words are found again in the table's rows by their text, in order.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from pagemill.documents.blocks import Block, BlockKind, Line, PageBlocks, Word
from pagemill.documents.blocks import Box as PointBox
from worker.engines import ocr_boxes
from worker.engines.ocr_boxes import Table, level, rows_of
from worker.engines.ocr_layout import (
    _HEADING_HEIGHT,
    _HEADING_MAX_WORDS,
    _PARAGRAPH_GAP_H,
    regions,
)
from worker.engines.ocr_tables import find_tables

POINTS_PER_INCH = 72


def blocks_from_ocr_lines(
    lines: Sequence[ocr_boxes.Line],
    image_width_px: int,
    image_height_px: int,
    image_dpi: int,
    page_number: int,
    engine: str,
) -> PageBlocks:
    """The page's blocks from its OCR lines (boxes in pixels of an image at `image_dpi`)."""
    scale = POINTS_PER_INCH / image_dpi
    page = PageBlocks(
        page=page_number,
        width_pt=round(image_width_px * scale, 2),
        height_pt=round(image_height_px * scale, 2),
        engine=engine,
    )
    read = [line for line in lines if line.text.strip()]
    if not read:
        return page
    levelled = level(read)
    as_read = {id(flat): line for flat, line in zip(levelled, read, strict=True)}
    h = statistics.median(line.box.height for line in levelled)
    tables, rest = find_tables(levelled, h)
    kept = {id(line) for line in rest}
    members = _table_members(tables, [line for line in levelled if id(line) not in kept])
    blocks: list[Block] = []
    for region in regions([*rest, *tables], h):
        for group in _paragraphs(region, h):
            if isinstance(group, Table):
                table_lines = members[id(group)]
                blocks.extend(_table_blocks(group, table_lines, as_read, scale))
            else:
                blocks.append(_text_block([as_read[id(line)] for line in group], h, scale))
    return page.model_copy(update={"blocks": blocks})


# --- paragraphs ----------------------------------------------------------------------------


def _paragraphs(region: Sequence[ocr_boxes.Block], h: float) -> list[Table | list[ocr_boxes.Line]]:
    """The region's tables and paragraphs, top to bottom, cut where the Markdown cuts them:
    a gap of more than a paragraph's, or a row of clearly another height (a heading)."""
    groups: list[Table | list[ocr_boxes.Line]] = []
    current: list[ocr_boxes.Line] = []
    last_bottom: float | None = None
    first_height = 0.0
    for row in rows_of(region):
        groups.extend(block for block in row if isinstance(block, Table))
        texts = [block for block in row if isinstance(block, ocr_boxes.Line)]
        if not texts:
            continue
        top = min(line.box.y0 for line in texts)
        height = statistics.median(line.box.height for line in texts)
        if (
            not current
            or last_bottom is None
            or top - last_bottom > _PARAGRAPH_GAP_H * h
            or max(height, first_height) > _HEADING_HEIGHT * min(height, first_height)
        ):
            current = []
            groups.append(current)
            first_height = height
        current.extend(texts)
        last_bottom = max(line.box.y1 for line in texts)
    return groups


def _text_block(lines: Sequence[ocr_boxes.Line], h: float, scale: float) -> Block:
    words = " ".join(line.text for line in lines).split()
    tall = statistics.median(line.box.height for line in lines) >= _HEADING_HEIGHT * h
    heading = (
        tall
        and len(words) <= _HEADING_MAX_WORDS
        and any(ch.isalpha() for ch in "".join(words))
        and len(rows_of(lines)) == 1
    )
    converted = [_line(line, scale) for line in lines]
    return Block(
        kind=BlockKind.HEADING if heading else BlockKind.TEXT,
        box=_union(line.box for line in converted),
        lines=converted,
    )


# --- tables --------------------------------------------------------------------------------


def _table_members(
    tables: Sequence[Table], lines: Sequence[ocr_boxes.Line]
) -> dict[int, list[ocr_boxes.Line]]:
    """Each table's lines: the lines the finder took, by the table whose box holds them."""
    members: dict[int, list[ocr_boxes.Line]] = {id(table): [] for table in tables}
    for line in lines:
        holding = [
            t
            for t in tables
            if t.box.x0 <= line.box.cx <= t.box.x1 and t.box.y0 <= line.box.cy <= t.box.y1
        ]
        if holding:
            members[id(holding[0])].append(line)
    return members


def _table_blocks(
    table: Table,
    lines: Sequence[ocr_boxes.Line],
    as_read: dict[int, ocr_boxes.Line],
    scale: float,
) -> list[Block]:
    read = [as_read[id(line)] for line in lines]
    converted = [_line(line, scale) for line in read]
    box = _union([_point_box(table.box, scale)] if not converted else [c.box for c in converted])
    cells = _cells(table, lines, as_read, scale)
    return [Block(kind=BlockKind.TABLE, box=box, lines=converted), *cells]


def _cells(
    table: Table,
    lines: Sequence[ocr_boxes.Line],
    as_read: dict[int, ocr_boxes.Line],
    scale: float,
) -> list[Block]:
    """Cells with the words the finder put in them, at their row and column in its table."""
    placed = _place_words(table, lines, as_read)
    cells: list[Block] = []
    for (row, column), words_by_line in sorted(placed.items()):
        cell_lines = [_words_line(words, scale) for words in words_by_line]
        cells.append(
            Block(
                kind=BlockKind.TABLE_CELL,
                box=_union(line.box for line in cell_lines),
                lines=cell_lines,
                row=row,
                column=column,
            )
        )
    return cells


def _place_words(
    table: Table, lines: Sequence[ocr_boxes.Line], as_read: dict[int, ocr_boxes.Line]
) -> dict[tuple[int, int], list[list[ocr_boxes.Word]]]:
    """The table's words (as read) by cell, grouped by the line they came from.

    Words are visited in the order the finder took them (rows top to bottom, lines left to
    right, words in line order) and each goes to the first cell, row by row, whose next
    expected words it is. A row the finder joined to the one above (a description's second
    line) is found there, as its words come next in that cell."""
    expected = {
        (r, c): text.split() for r, row in enumerate(table.rows) for c, text in enumerate(row)
    }
    taken = dict.fromkeys(expected, 0)
    placed: dict[tuple[int, int], list[list[ocr_boxes.Word]]] = {}
    for row in rows_of(lines):
        for line in (block for block in row if isinstance(block, ocr_boxes.Line)):
            last: tuple[int, int] | None = None
            for word in as_read[id(line)].words:
                tokens = word.text.split()
                cell = next(
                    (
                        key
                        for key, words in expected.items()
                        if words[taken[key] : taken[key] + len(tokens)] == tokens
                    ),
                    None,
                )
                if cell is None:
                    continue
                taken[cell] += len(tokens)
                if cell != last or cell not in placed:
                    placed.setdefault(cell, []).append([])
                placed[cell][-1].append(word)
                last = cell
    return placed


# --- conversion ----------------------------------------------------------------------------


def _line(line: ocr_boxes.Line, scale: float) -> Line:
    return Line(
        text=line.text,
        box=_point_box(line.box, scale),
        words=[_word(word, scale) for word in line.words],
        confidence=line.confidence,
    )


def _words_line(words: Sequence[ocr_boxes.Word], scale: float) -> Line:
    converted = [_word(word, scale) for word in words]
    return Line(
        text=" ".join(word.text for word in converted),
        box=_union(word.box for word in converted),
        words=converted,
    )


def _word(word: ocr_boxes.Word, scale: float) -> Word:
    return Word(text=word.text, box=_point_box(word.box, scale), confidence=word.confidence)


def _point_box(box: ocr_boxes.Box, scale: float) -> PointBox:
    return (
        round(box.x0 * scale, 2),
        round(box.y0 * scale, 2),
        round(box.x1 * scale, 2),
        round(box.y1 * scale, 2),
    )


def _union(boxes: Iterable[PointBox]) -> PointBox:
    boxes = list(boxes)
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )
