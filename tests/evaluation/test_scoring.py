"""The reference table is compared with the output's table that agrees with it best."""

from __future__ import annotations

from pathlib import Path

from cli.evaluation.discovery import GroundTruth
from cli.evaluation.scoring import score_document

LINE_ITEMS = """| Item | Qty | Amount |
| --- | --- | --- |
| Chair | 1 | 70.00 |
| Lamp | 2 | 30.00 |
"""

ADDRESSES = """| Billing address | Shipping address |
| --- | --- |
| A. Singh | A. Singh |
| 3/64 Gomti Nagar | 3/64 Gomti Nagar |
"""


def test_line_items_after_an_address_table_are_scored_as_the_line_items(tmp_path: Path) -> None:
    reference = tmp_path / "invoice.table.md"
    reference.write_text(LINE_ITEMS)
    scores = score_document(f"{ADDRESSES}\nTotal due\n\n{LINE_ITEMS}", GroundTruth(table=reference))
    assert scores.table is not None
    assert (scores.table.rows, scores.table.columns, scores.table.cells) == (1.0, 1.0, 1.0)


def test_an_output_without_tables_agrees_in_nothing(tmp_path: Path) -> None:
    reference = tmp_path / "invoice.table.md"
    reference.write_text(LINE_ITEMS)
    scores = score_document("Chair 1 70.00\nLamp 2 30.00", GroundTruth(table=reference))
    assert scores.table is not None
    assert (scores.table.rows, scores.table.cells) == (0.0, 0.0)
