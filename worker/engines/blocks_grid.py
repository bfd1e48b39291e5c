"""A born-digital table's cells, from where its words stand.

The layout model says where a table is, not where its cells are. Rows are the table's
lines side by side; columns are the runs of the page the words cover, cut where every
row leaves a gap wider than a word space. PyMuPDF's own table finder does the same and
more, but takes 30-800 ms a page (it reads every character of the page again), where
this takes a millisecond or two.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence

from pagemill.documents.blocks import Block, BlockKind, Box, Line, Word

# A gap between columns is wider than a third of a word's height: a word space is a
# quarter of the font size or a little more, a word's box 1.15-1.4 times it.
GUTTER_H = 0.35
# In a table of this many rows or more, one word may cross a gutter (a description
# running long) without closing it.
STRAY_ROWS = 6
# Coverage of the width is counted in steps of this many points.
_STEP_PT = 0.5


def grid_cells(lines: Sequence[Line]) -> list[Block]:
    """The table's cells, row by row, each with its row and column and its words' box."""
    words = [word for line in lines for word in line.words]
    if not words:
        return []
    rows = _rows(lines)
    h = statistics.median(w.box[3] - w.box[1] for w in words)
    columns = _columns(words, len(rows), GUTTER_H * h)
    cells: list[Block] = []
    for row_index, row in enumerate(rows):
        by_column: dict[int, list[Word]] = defaultdict(list)
        for line in row:
            column: int | None = None
            for word in line.words:
                # A word in a gutter belongs with the word before it on its line: a long
                # description running past its column stays in its cell.
                inside = _column_holding(word.box, columns)
                if inside is not None:
                    column = inside
                elif column is None:
                    column = _column_of(word.box, columns)
                by_column[column].append(word)
        for column, cell_words in sorted(by_column.items()):
            cell_lines = [_line(ws) for ws in _lines_of(cell_words)]
            cells.append(
                Block(
                    kind=BlockKind.TABLE_CELL,
                    box=_union([line.box for line in cell_lines]),
                    lines=cell_lines,
                    row=row_index,
                    column=column,
                )
            )
    return cells


def _rows(lines: Sequence[Line]) -> list[list[Line]]:
    """Lines by visual row, each row left to right: a line joins a row when its middle
    lies within the row's span, trimmed by a quarter of its height at either end."""
    rows: list[list[Line]] = []
    spans: list[tuple[float, float]] = []
    for line in sorted(lines, key=lambda ln: (ln.box[1] + ln.box[3]) / 2):
        middle = (line.box[1] + line.box[3]) / 2
        if spans:
            top, bottom = spans[-1]
            margin = (bottom - top) / 4
            if top + margin <= middle <= bottom - margin:
                rows[-1].append(line)
                spans[-1] = (min(top, line.box[1]), max(bottom, line.box[3]))
                continue
        rows.append([line])
        spans.append((line.box[1], line.box[3]))
    return [sorted(row, key=lambda ln: ln.box[0]) for row in rows]


def _columns(words: Sequence[Word], n_rows: int, gutter_pt: float) -> list[tuple[float, float]]:
    left = min(w.box[0] for w in words)
    steps = int((max(w.box[2] for w in words) - left) / _STEP_PT) + 1
    coverage = [0] * (steps + 1)
    for word in words:
        for step in range(
            int((word.box[0] - left) / _STEP_PT), int((word.box[2] - left) / _STEP_PT) + 1
        ):
            coverage[step] += 1
    stray = 1 if n_rows >= STRAY_ROWS else 0
    min_gap = max(1, int(gutter_pt / _STEP_PT))
    columns: list[tuple[float, float]] = []
    start: int | None = None
    empty = 0
    for step, count in enumerate(coverage):
        if count > stray:
            if start is None:
                start = step
            elif empty >= min_gap:
                columns.append((left + start * _STEP_PT, left + (step - empty) * _STEP_PT))
                start = step
            empty = 0
        elif start is not None:
            empty += 1
    if start is not None:
        columns.append((left + start * _STEP_PT, left + (len(coverage) - empty) * _STEP_PT))
    return columns or [(left, left + steps * _STEP_PT)]


def _column_holding(box: Box, columns: Sequence[tuple[float, float]]) -> int | None:
    middle = (box[0] + box[2]) / 2
    return next((i for i, (start, end) in enumerate(columns) if start <= middle <= end), None)


def _column_of(box: Box, columns: Sequence[tuple[float, float]]) -> int:
    middle = (box[0] + box[2]) / 2

    def distance(index: int) -> float:
        start, end = columns[index]
        return max(start - middle, 0.0, middle - end)

    return min(range(len(columns)), key=distance)


def _lines_of(words: Sequence[Word]) -> list[list[Word]]:
    """A cell's words in lines: a word whose middle is below the line's box starts another."""
    lines: list[list[Word]] = []
    for word in sorted(words, key=lambda w: (w.box[1], w.box[0])):
        middle = (word.box[1] + word.box[3]) / 2
        if lines and middle <= max(w.box[3] for w in lines[-1]):
            lines[-1].append(word)
        else:
            lines.append([word])
    return [sorted(line, key=lambda w: w.box[0]) for line in lines]


def _line(words: Sequence[Word]) -> Line:
    return Line(
        text=" ".join(w.text for w in words),
        box=_union([w.box for w in words]),
        words=list(words),
    )


def _union(boxes: Sequence[Box]) -> Box:
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )
