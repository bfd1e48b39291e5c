"""Tables on scans: runs of rows split into aligned cells, columns from the words.

The recogniser gives lines, not cells: a row of a table is a visual row of three or
more line boxes, and two close cells often come as one line ("0.00 15.00%"), so the
columns are found from where the words stand, over the table's full rows.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from worker.engines.ocr_boxes import Box, Line, Table, Word, rows_of, union

# A table row has three or more cells; a table, two or more such rows whose cells
# are short (text columns have long lines, table cells a few words).
_TABLE_MIN_CELLS = 3
_TABLE_MIN_ROWS = 2
_TABLE_MAX_MEDIAN_WORDS = 4
# Rows with fewer cells (section labels, wrapped descriptions, subtotals) stay in
# a table when a full row follows within this many rows and this gap.
_TABLE_BRIDGE_ROWS = 2
_TABLE_BRIDGE_GAP_H = 1.0
# Word boxes come from the recogniser's character positions and are loose: cells
# merged into one line ("0.00 15.00%") are 0.2 h apart at the least.
_TABLE_GUTTER_H = 0.15
# A headless column filled in at most this share of the full rows is not a column.
_SPARSE_COLUMN = 0.4


def find_tables(lines: Sequence[Line], h: float) -> tuple[list[Table], list[Line]]:
    """Tables found among the lines, and the lines left over."""
    rows = rows_of(lines)
    line_rows: list[list[Line]] = [[b for b in row if isinstance(b, Line)] for row in rows]
    tables: list[Table] = []
    used: set[int] = set()
    for start, stop in _table_runs(line_rows, h):
        table = _table_from_rows(line_rows[start:stop], h)
        if table is not None:
            tables.append(table)
            used.update(range(start, stop))
    rest = [line for index, row in enumerate(line_rows) if index not in used for line in row]
    return tables, rest


def _is_table_row(row: Sequence[Line]) -> bool:
    return len(row) >= _TABLE_MIN_CELLS


def _table_runs(rows: Sequence[Sequence[Line]], h: float) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    index = 0
    while index < len(rows):
        if not _is_table_row(rows[index]):
            index += 1
            continue
        start = stop = index
        full_rows = 1
        probe = index + 1
        while probe < len(rows) and probe - stop <= _TABLE_BRIDGE_ROWS + 1:
            gap = rows[probe][0].box.y0 - max(line.box.y1 for line in rows[probe - 1])
            if gap > _TABLE_BRIDGE_GAP_H * h:
                break
            if _is_table_row(rows[probe]):
                stop = probe
                full_rows += 1
            probe += 1
        if full_rows >= _TABLE_MIN_ROWS:
            runs.append((start, stop + 1))
        index = stop + 1
    return runs


def _table_from_rows(rows: Sequence[Sequence[Line]], h: float) -> Table | None:
    cells_words = [len(line.text.split()) for row in rows if _is_table_row(row) for line in row]
    if statistics.median(cells_words) > _TABLE_MAX_MEDIAN_WORDS:
        return None
    # Full rows define the columns; the rows bridged between them (section labels,
    # subtotals, wrapped descriptions) are placed in those columns.
    full_rows = [row for row in rows if _is_table_row(row)]
    if _is_label_and_value_rows(full_rows):
        return None
    words = [word for row in full_rows for line in row for word in line.words]
    columns = _table_columns(words, len(full_rows), h)
    if len(columns) < _TABLE_MIN_CELLS:
        return None
    table_rows = []
    for row in rows:
        cells: list[list[str]] = [[] for _ in columns]
        for line in row:
            column: int | None = None
            for word in line.words:
                # A word in a gutter belongs with the word before it on its line: a
                # wrapped description running past its column stays in its cell.
                inside = _column_containing(word.box, columns)
                if inside is not None:
                    column = inside
                elif column is None:
                    column = _nearest_column(word.box, columns)
                cells[column].append(word.text)
        table_rows.append(tuple(" ".join(cell) for cell in cells))
    table_rows = _without_sparse_columns(table_rows, [_is_table_row(row) for row in rows])
    if len(table_rows[0]) < _TABLE_MIN_CELLS:
        return None
    box = union([line.box for row in rows for line in row])
    return Table(tuple(table_rows), box)


def _without_sparse_columns(
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


def _is_label_and_value_rows(full_rows: Sequence[Sequence[Line]]) -> bool:
    """A row of labels ("Invoice Date:", "Due Date:") over a row of values is a form's
    fields, read as lines, not a table."""
    return len(full_rows) == 2 and all(line.text.rstrip().endswith(":") for line in full_rows[0])


def _table_columns(words: Sequence[Word], n_rows: int, h: float) -> list[tuple[float, float]]:
    """Column spans where words stand; a stray word crossing a gutter in one row of a
    long table (a wrapped description) does not close that gutter."""
    x0 = int(min(w.box.x0 for w in words))
    x1 = int(max(w.box.x1 for w in words)) + 1
    coverage = [0] * (x1 - x0 + 1)
    for word in words:
        for x in range(int(word.box.x0) - x0, int(word.box.x1) - x0 + 1):
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


def _column_containing(box: Box, columns: Sequence[tuple[float, float]]) -> int | None:
    for index, (left, right) in enumerate(columns):
        if left <= box.cx <= right:
            return index
    return None


def _nearest_column(box: Box, columns: Sequence[tuple[float, float]]) -> int:
    def distance(column: tuple[float, float]) -> float:
        left, right = column
        return max(left - box.cx, 0.0, box.cx - right)

    return min(range(len(columns)), key=lambda index: distance(columns[index]))
