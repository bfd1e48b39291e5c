"""Two-column tables on scans: runs of labels with their amounts flush right.

A statement's charges ("Charges  $1.87", "VAT  $0.00") or a receipt's items are tables
of two cells a row: the label on the left, the amount set flush right in a column of
its own. Two line boxes side by side are common on any page (a sender's address beside
the recipient's, two columns of prose, a lone "TOTAL  9.00"), so a run becomes a table
only when every row of it is one label and one short cell holding a figure, the figures'
right edges line up, and there are at least three such rows one under the other.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from worker.engines.ocr_boxes import Line, Table, union

# Three rows: two could be an address and its postcode, or a subtotal and a total.
_MIN_ROWS = 3
# An amount is a few words at most ("$ 42.00", "€ 399,00", "1.00 Units").
_AMOUNT_MAX_WORDS = 3
_FIGURE = re.compile(r"\d")
# Right edges of figures set flush right agree within this (as rows' edges in
# `ocr_tables`); rows further apart than the gap are not one run.
_EDGE_H = 0.75
_ROW_GAP_H = 1.0
# The label ends clear of the amount's column: a plain word space is no cell boundary.
_CELL_GAP_H = 1.0


def label_amount_runs(
    rows: Sequence[Sequence[Line]], used: Collection[int], h: float
) -> list[tuple[int, int]]:
    """Runs (start, stop) of consecutive rows outside `used` that are one table of labels
    and amounts."""
    runs: list[tuple[int, int]] = []
    start = 0
    while start < len(rows):
        stop = start
        while (
            stop < len(rows)
            and stop not in used
            and _is_label_and_amount(rows[stop], h)
            and (stop == start or _continues(rows[stop - 1], rows[stop], rows[start], h))
        ):
            stop += 1
        if stop - start >= _MIN_ROWS:
            runs.append((start, stop))
        start = max(stop, start + 1)
    return runs


def label_amount_table(rows: Sequence[Sequence[Line]]) -> Table:
    cells = tuple((label.text, amount.text) for label, amount in rows)
    return Table(cells, union([line.box for row in rows for line in row]))


def _is_label_and_amount(row: Sequence[Line], h: float) -> bool:
    if len(row) != 2:
        return False
    label, amount = row
    return (
        len(amount.text.split()) <= _AMOUNT_MAX_WORDS
        and bool(_FIGURE.search(amount.text))
        and amount.box.x0 - label.box.x1 >= _CELL_GAP_H * h
    )


def _continues(above: Sequence[Line], row: Sequence[Line], first: Sequence[Line], h: float) -> bool:
    """The row lies right under the one above, its amount flush with the run's first."""
    gap = row[0].box.y0 - max(line.box.y1 for line in above)
    amount, first_amount = row[1].box, first[1].box
    label, first_label = row[0].box, first[0].box
    return (
        gap <= _ROW_GAP_H * h
        and abs(amount.x1 - first_amount.x1) <= _EDGE_H * h
        # Labels stand in one column, left of every amount of the run.
        and label.x0 < first_amount.x0
        and first_label.x0 < amount.x0
    )
