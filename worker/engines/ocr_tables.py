"""Tables on scans: runs of rows split into aligned cells, columns from the words.

The recogniser gives lines, not cells: a row of a table is a visual row of three or
more line boxes, and two close cells often come as one line ("0.00 15.00%"), so the
columns are found from where the words stand, over the table's fullest rows
(`ocr_table_cells`, which also cuts the rows into cells). A wrapped description stays
a row of its own, as the born-digital page's table and text layer give it. Rows of two
cells make a table only as a run of labels with their amounts flush right in one column
(`ocr_table_pairs`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from worker.engines.ocr_boxes import Line, Table, rows_of, union
from worker.engines.ocr_table_cells import (
    row_cells,
    table_columns,
    without_sparse_columns,
    word_runs,
)
from worker.engines.ocr_table_pairs import label_amount_runs, label_amount_table

# A table row has three or more cells; a table, two or more such rows whose cells
# are short (text columns have long lines, table cells a few words).
_TABLE_MIN_CELLS = 3
_TABLE_MIN_ROWS = 2
_TABLE_MAX_MEDIAN_WORDS = 4
# Rows with fewer cells (section labels, wrapped descriptions, subtotals) stay in
# a table when a full row follows within this many rows and this gap.
_TABLE_BRIDGE_ROWS = 2
_TABLE_BRIDGE_GAP_H = 1.0
# Tables with ruled or shaded rows space them out (2.2 h on a hotel receipt): rows that
# far apart stay in the table when they start and end where its rows do.
_TABLE_LOOSE_GAP_H = 3.0
_TABLE_EDGE_H = 0.75
# Columns come from the rows with the most cells, or one fewer (a header may read two
# cells as one line): a total whose label spans columns ("Factuur totaal EUR") would
# close their gutters.
_DENSE_ROW_SLACK = 1


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
    for start, stop in label_amount_runs(line_rows, used, h):
        tables.append(label_amount_table(line_rows[start:stop]))
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
        most = len(rows[index])
        probe = index + 1
        while probe < len(rows) and probe - stop <= _TABLE_BRIDGE_ROWS + 1:
            gap = rows[probe][0].box.y0 - max(line.box.y1 for line in rows[probe - 1])
            if gap > _TABLE_BRIDGE_GAP_H * h and not (
                gap <= _TABLE_LOOSE_GAP_H * h and _same_columns(rows[stop], rows[probe], h)
            ):
                break
            if _is_table_row(rows[probe]):
                if len(rows[probe]) > most and not _one_under_the_other(rows[stop], rows[probe]):
                    break
                stop = probe
                full_rows += 1
                most = max(most, len(rows[probe]))
            probe += 1
        # A last row that starts and ends where the table's rows do (a balance, a total)
        # is the table's own, though it fills fewer cells.
        after = stop + 1
        if after < len(rows) and _same_columns(rows[stop], rows[after], h):
            gap = rows[after][0].box.y0 - max(line.box.y1 for line in rows[stop])
            if gap <= _TABLE_LOOSE_GAP_H * h:
                stop = after
        if full_rows >= _TABLE_MIN_ROWS:
            runs.append((start, stop + 1))
        index = stop + 1
    return runs


def _same_columns(row: Sequence[Line], other: Sequence[Line], h: float) -> bool:
    """Two rows far apart are rows of one table when they start and end at the same
    places (the first column's left edge, the last column's right edge: amounts are set
    flush right) and, both full, each cell of one stands over a cell of the other: two
    tables one above the other (an invoice's header fields over its line items) differ
    in their middle columns."""
    if len(other) < 2:
        return False
    if abs(row[0].box.x0 - other[0].box.x0) > _TABLE_EDGE_H * h:
        return False
    if abs(row[-1].box.x1 - other[-1].box.x1) > _TABLE_EDGE_H * h:
        return False
    if not _is_table_row(other):
        return True
    return _every_line_over_one(row, other) and _every_line_over_one(other, row)


def _one_under_the_other(row: Sequence[Line], other: Sequence[Line]) -> bool:
    """Two full rows of one table: the cells of one each stand under a cell of the other
    (either may leave a column empty). A row with more cells than any before it that
    shares neither way starts a new table: line items under address blocks side by side."""
    return _every_line_over_one(row, other) or _every_line_over_one(other, row)


def _every_line_over_one(row: Sequence[Line], other: Sequence[Line]) -> bool:
    return all(any(min(a.box.x1, b.box.x1) > max(a.box.x0, b.box.x0) for b in other) for a in row)


def _table_from_rows(rows: Sequence[Sequence[Line]], h: float) -> Table | None:
    cells_words = [len(line.text.split()) for row in rows if _is_table_row(row) for line in row]
    if statistics.median(cells_words) > _TABLE_MAX_MEDIAN_WORDS:
        return None
    # Full rows define the columns; the rows bridged between them (section labels,
    # subtotals, wrapped descriptions) are placed in those columns.
    full_rows = [row for row in rows if _is_table_row(row)]
    if _is_label_and_value_rows(full_rows):
        return None
    most = max(len(row) for row in full_rows)
    dense_rows = [row for row in full_rows if len(row) >= most - _DENSE_ROW_SLACK]
    spans = [span for row in dense_rows for line in row for span in word_runs(line, h)]
    columns = table_columns(spans, len(dense_rows), h)
    if len(columns) < _TABLE_MIN_CELLS:
        return None
    full = [_is_table_row(row) for row in rows]
    table_rows = without_sparse_columns([row_cells(row, columns) for row in rows], full)
    if len(table_rows[0]) < _TABLE_MIN_CELLS:
        return None
    box = union([line.box for row in rows for line in row])
    return Table(tuple(table_rows), box)


def _is_label_and_value_rows(full_rows: Sequence[Sequence[Line]]) -> bool:
    """A row of labels ("Invoice Date:", "Due Date:") over a row of values is a form's
    fields, read as lines, not a table."""
    return len(full_rows) == 2 and all(line.text.rstrip().endswith(":") for line in full_rows[0])
