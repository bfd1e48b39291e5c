"""Tables on scans: runs of rows split into aligned cells, columns from the words.

The recogniser gives lines, not cells: a row of a table is a visual row of three or
more line boxes, and two close cells often come as one line ("0.00 15.00%"), so the
columns are found from where the words stand, over the table's full rows.
"""

from __future__ import annotations

import itertools
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
# Tables with ruled or shaded rows space them out (2.2 h on a hotel receipt): rows that
# far apart stay in the table when they start and end where its rows do.
_TABLE_LOOSE_GAP_H = 3.0
_TABLE_EDGE_H = 0.75
# Columns come from the rows with the most cells, or one fewer (a header may read two
# cells as one line): a total whose label spans columns ("Factuur totaal EUR") would
# close their gutters.
_DENSE_ROW_SLACK = 1
# A row without amounts right under a row of the table, as close as the lines of a
# paragraph, is the wrapped text of that row's cells ("10 48 MB/s Memory Card").
_WRAP_GAP_H = 0.5
# A cell is an amount when at least half its letters and digits are digits
# ("$ 42.00", "1.00 kg", "14.50%"), a column of amounts when half its cells or more are.
_AMOUNT_DIGITS = 0.5
# Word boxes come from the recogniser's character positions and are loose: cells
# merged into one line ("0.00 15.00%") are 0.2 h apart at the least.
_TABLE_GUTTER_H = 0.15
# ... and at 150 dpi 0.45 h apart on the invoices measured, where the spaces between the
# words of one cell ("Rs 1939 x 1 Night") are under 0.3 h: narrower spaces never make a
# gutter, so a few long cells cannot line their spaces up into columns by chance.
_WORD_SPACE_H = 0.3
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
    spans = [span for row in dense_rows for line in row for span in _word_runs(line, h)]
    columns = _table_columns(spans, len(dense_rows), h)
    if len(columns) < _TABLE_MIN_CELLS:
        return None
    table_rows = [_row_cells(row, columns) for row in rows]
    table_rows = _without_sparse_columns(table_rows, [_is_table_row(row) for row in rows])
    if len(table_rows[0]) < _TABLE_MIN_CELLS:
        return None
    table_rows = _with_wrapped_rows_joined(table_rows, rows, h)
    box = union([line.box for row in rows for line in row])
    return Table(tuple(table_rows), box)


def _row_cells(row: Sequence[Line], columns: Sequence[tuple[float, float]]) -> tuple[str, ...]:
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
                inside = _column_containing(word.box, columns)
                column = inside if inside is not None else _nearest_column(word.box, columns)
            cells[column].append(word.text)
            previous = word
    return tuple(" ".join(cell) for cell in cells)


def _spans_gutter(left: float, right: float, columns: Sequence[tuple[float, float]]) -> bool:
    for (_, gutter_left), (gutter_right, _) in itertools.pairwise(columns):
        covered = min(right, gutter_right) - max(left, gutter_left)
        if covered >= 0.5 * (gutter_right - gutter_left):
            return True
    return False


def _with_wrapped_rows_joined(
    cells: list[tuple[str, ...]], rows: Sequence[Sequence[Line]], h: float
) -> list[tuple[str, ...]]:
    """Rows holding no amount where the table has amounts, set right under a row of the
    table at a paragraph's line spacing, joined cell by cell to the row above."""
    amounts = _amount_columns(
        [row for row, line_row in zip(cells, rows, strict=True) if _is_table_row(line_row)][1:]
    )
    joined = [cells[0]]
    # Only into a row with amounts (an item): never into the header or a section label,
    # which the next label or item often follows as closely.
    joinable = False
    for index in range(1, len(rows)):
        gap = min(line.box.y0 for line in rows[index]) - max(
            line.box.y1 for line in rows[index - 1]
        )
        has_amount = any(_is_amount(cells[index][column]) for column in amounts)
        if joinable and not has_amount and gap <= _WRAP_GAP_H * h:
            joined[-1] = tuple(
                f"{above} {below}".strip()
                for above, below in zip(joined[-1], cells[index], strict=True)
            )
        else:
            joined.append(cells[index])
            joinable = has_amount and _is_table_row(rows[index])
    return joined


def _amount_columns(body: Sequence[tuple[str, ...]]) -> list[int]:
    if not body:
        return []
    columns = []
    for index in range(len(body[0])):
        filled = [row[index] for row in body if row[index]]
        if filled and sum(map(_is_number, filled)) >= len(filled) / 2:
            columns.append(index)
    return columns


def _is_amount(cell: str) -> bool:
    """A cell that is or holds an amount ("Subtotal $ 112.00" holds one)."""
    return any(_is_number(token) for token in cell.split())


def _is_number(text: str) -> bool:
    digits = sum(ch.isdigit() for ch in text)
    letters = sum(ch.isalpha() for ch in text)
    return digits > 0 and digits >= _AMOUNT_DIGITS * (digits + letters)


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


def _word_runs(line: Line, h: float) -> list[tuple[float, float]]:
    """Where a line's words stand, words a plain space apart taken as one run."""
    runs: list[tuple[float, float]] = []
    for word in line.words:
        if runs and word.box.x0 - runs[-1][1] < _WORD_SPACE_H * h:
            runs[-1] = (runs[-1][0], max(runs[-1][1], word.box.x1))
        else:
            runs.append((word.box.x0, word.box.x1))
    return runs


def _table_columns(
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
