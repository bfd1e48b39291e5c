"""A table's cells: columns from where the words stand, rows cut into cells.

Boxes are in image pixels and gaps in units of the page's median line height h, as in
`ocr_tables`, which finds the rows of a table and hands them here.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from worker.engines.ocr_boxes import Box, Line, Word

# Word boxes come from the recogniser's character positions and are loose: cells
# merged into one line ("0.00 15.00%") are 0.2 h apart at the least.
_TABLE_GUTTER_H = 0.15
# ... and at 150 dpi 0.45 h apart on the invoices measured, where the spaces between the
# words of one cell ("Rs 1939 x 1 Night") are under 0.3 h: narrower spaces never make a
# gutter, so a few long cells cannot line their spaces up into columns by chance.
_WORD_SPACE_H = 0.3
# A headless column filled in at most this share of the full rows is not a column.
_SPARSE_COLUMN = 0.4


def row_cells(row: Sequence[Line], columns: Sequence[tuple[float, float]]) -> tuple[str, ...]:
    """A row's text by column. A line is cut only where the space between two of its
    words holds most of a gutter: cells the recogniser read as one line ("0.00 15.00%")
    come apart, a label running past its column ("Prijzen zijn inclusief BTW") does not."""
    cells: list[list[str]] = [[] for _ in columns]
    for line in row:
        column: int | None = None
        previous: Word | None = None
        for word in line.words:
            if column is None or (
                previous is not None and _spans_gutter(previous.box.x1, word.box.x0, columns)
            ):
                inside = column_containing(word.box, columns)
                column = inside if inside is not None else nearest_column(word.box, columns)
            cells[column].append(word.text)
            previous = word
    return tuple(" ".join(cell) for cell in cells)


def _spans_gutter(left: float, right: float, columns: Sequence[tuple[float, float]]) -> bool:
    for (_, gutter_left), (gutter_right, _) in itertools.pairwise(columns):
        covered = min(right, gutter_right) - max(left, gutter_left)
        if covered >= 0.5 * (gutter_right - gutter_left):
            return True
    return False


def without_sparse_columns(
    rows: list[tuple[str, ...]], full: Sequence[bool]
) -> list[tuple[str, ...]]:
    """A column with no header and text in few full rows is the tail of the column to its
    left (long descriptions the recogniser cut in two), joined back to it."""
    full_rows = [row for row, is_full in zip(rows, full, strict=True) if is_full]
    keep = [
        index == 0
        or bool(rows[0][index])
        or sum(1 for row in full_rows if row[index]) > _SPARSE_COLUMN * len(full_rows)
        for index in range(len(rows[0]))
    ]
    merged = []
    for row in rows:
        cells: list[str] = []
        for index, cell in enumerate(row):
            if keep[index]:
                cells.append(cell)
            elif cell:
                cells[-1] = f"{cells[-1]} {cell}".strip()
        merged.append(tuple(cells))
    return merged


def word_runs(line: Line, h: float) -> list[tuple[float, float]]:
    """Where a line's words stand, words a plain space apart taken as one run."""
    runs: list[tuple[float, float]] = []
    for word in line.words:
        if runs and word.box.x0 - runs[-1][1] < _WORD_SPACE_H * h:
            runs[-1] = (runs[-1][0], max(runs[-1][1], word.box.x1))
        else:
            runs.append((word.box.x0, word.box.x1))
    return runs


def table_columns(
    spans: Sequence[tuple[float, float]], n_rows: int, h: float
) -> list[tuple[float, float]]:
    """Column spans where words stand; a stray word crossing a gutter in one row of a
    long table (a wrapped description) does not close that gutter."""
    x0 = int(min(left for left, _ in spans))
    x1 = int(max(right for _, right in spans)) + 1
    coverage = [0] * (x1 - x0 + 1)
    for left, right in spans:
        for x in range(int(left) - x0, int(right) - x0 + 1):
            coverage[x] += 1
    stray = 1 if n_rows >= 6 else 0
    min_gutter = max(1, int(_TABLE_GUTTER_H * h))
    columns: list[tuple[float, float]] = []
    start: int | None = None
    empty = 0
    for x, count in enumerate(coverage):
        if count > stray:
            if start is None:
                start = x
            elif empty >= min_gutter:
                columns.append((x0 + start, x0 + x - empty))
                start = x
            empty = 0
        elif start is not None:
            empty += 1
    if start is not None:
        columns.append((x0 + start, x0 + len(coverage) - 1 - empty))
    return columns


def column_containing(box: Box, columns: Sequence[tuple[float, float]]) -> int | None:
    for index, (left, right) in enumerate(columns):
        if left <= box.cx <= right:
            return index
    return None


def nearest_column(box: Box, columns: Sequence[tuple[float, float]]) -> int:
    def distance(column: tuple[float, float]) -> float:
        left, right = column
        return max(left - box.cx, 0.0, box.cx - right)

    return min(range(len(columns)), key=lambda index: distance(columns[index]))
