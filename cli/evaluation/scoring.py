"""One converted document against its ground truth, with the metrics of `pagemill.quality`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cli.evaluation.discovery import GroundTruth, load_invoice_fields
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
        table=None if table_reference is None else table_agreement(markdown, table_reference),
    )


def _read(path: Path | None) -> str | None:
    return None if path is None else path.read_text(encoding="utf-8")


def _table_in(reference_text: str | None) -> str | None:
    """The reference text itself, when it holds a Markdown table to compare tables by."""
    if reference_text is None or not parse_table(reference_text):
        return None
    return reference_text
