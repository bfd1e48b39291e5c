"""One converted document against its ground truth, with the metrics of `pagemill.quality`.

The reference table is one table of the page (an invoice's line items); the output may
hold others before it (header fields, addresses laid out side by side, a VAT summary).
It is compared with the output's table that agrees with it best, so a page read into
several tables is scored on its line items, not on whichever table came first.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cli.evaluation.discovery import GroundTruth, load_invoice_fields
from pagemill.quality.checks import find_tables
from pagemill.quality.metrics import (
    FieldRecall,
    TableAgreement,
    bag_of_words_error_rate,
    character_error_rate,
    invoice_field_recall,
    parse_table,
    table_agreement,
)


@dataclass(frozen=True)
class DocumentScores:
    """Each is None when the document has no ground truth of that kind."""

    character_error_rate: float | None = None
    bag_of_words_error_rate: float | None = None
    fields: FieldRecall | None = None
    table: TableAgreement | None = None


def score_document(markdown: str, truth: GroundTruth) -> DocumentScores:
    reference_text = _read(truth.text)
    table_reference = _read(truth.table) or _table_in(reference_text)
    return DocumentScores(
        character_error_rate=(
            None if reference_text is None else character_error_rate(markdown, reference_text)
        ),
        bag_of_words_error_rate=(
            None if reference_text is None else bag_of_words_error_rate(markdown, reference_text)
        ),
        fields=(
            None
            if truth.invoice_fields is None
            else invoice_field_recall(markdown, load_invoice_fields(truth.invoice_fields))
        ),
        table=None if table_reference is None else best_table_agreement(markdown, table_reference),
    )


def best_table_agreement(markdown: str, reference: str) -> TableAgreement:
    """The agreement of the output's table closest to the reference (cells first); with no
    table in the output, the agreement of nothing (zero)."""
    lines = markdown.splitlines()
    tables = [
        "\n".join(lines[table.first_line - 1 : table.first_line - 1 + len(table.rows)])
        for table in find_tables(markdown)
    ]
    if not tables:
        return table_agreement(markdown, reference)
    return max(
        (table_agreement(table, reference) for table in tables),
        key=lambda agreement: (agreement.cells, agreement.rows, agreement.columns),
    )


def _read(path: Path | None) -> str | None:
    return None if path is None else path.read_text(encoding="utf-8")


def _table_in(reference_text: str | None) -> str | None:
    """The reference text itself, when it holds a Markdown table to compare tables by."""
    if reference_text is None or not parse_table(reference_text):
        return None
    return reference_text
