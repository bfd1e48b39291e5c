"""Invoice extraction scored field by field against invoice2data-style JSON.

A field is correct when its normalised value equals the reference's, normalised the
same way: amounts as decimals to the cent, dates as ISO dates, currencies as ISO 4217
codes, numbers without spaces or a leading "#" and in capitals. Recall counts the
documents whose reference has the field; precision counts the values given where the
reference has the field (a value the reference cannot judge counts for neither).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Protocol

from rich.table import Table

from cli.evaluation.discovery import ORIGINAL
from pagemill.invoices.schemas import Invoice, InvoiceDocument
from pagemill.invoices.values import normalise_id

# Our field -> the invoice2data key that holds it.
REFERENCE_KEYS = {
    "invoice_number": "invoice_number",
    "issue_date": "date",
    "due_date": "date_due",
    "total": "amount",
    "subtotal": "amount_untaxed",
    "tax_amount": "amount_tax",
    "currency": "currency",
    "payment_reference": "payment_reference",
}
SCANNED = "scanned (all kinds)"
# The fields the README states targets for.
TARGET_FIELDS = ("invoice_number", "issue_date", "total", "currency")


def _amount(value: Any) -> Decimal | None:
    try:
        return Decimal(str(value)).quantize(Decimal("0.01"))
    except (InvalidOperation, ValueError):
        return None


def _date(value: Any) -> date | None:
    try:
        return date.fromisoformat(str(value)[:10])
    except ValueError:
        return None


NORMALISERS: dict[str, Callable[[Any], object]] = {
    "invoice_number": lambda value: normalise_id(str(value)),
    "payment_reference": lambda value: normalise_id(str(value)),
    "issue_date": _date,
    "due_date": _date,
    "total": _amount,
    "subtotal": _amount,
    "tax_amount": _amount,
    "currency": lambda value: str(value).strip().upper(),
}


@dataclass(frozen=True)
class FieldOutcome:
    field: str
    expected: str | None  # the reference's value, as it is in the JSON
    found: str | None  # our normalised value
    correct: bool


@dataclass
class InvoiceScore:
    fields: list[FieldOutcome] = field(default_factory=list)
    verdict: str | None = None
    failed_checks: list[str] = field(default_factory=list)
    invoices_found: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "invoices_found": self.invoices_found,
            "verdict": self.verdict,
            "failed_checks": self.failed_checks,
            "fields": {
                outcome.field: {
                    "expected": outcome.expected,
                    "found": outcome.found,
                    "correct": outcome.correct,
                }
                for outcome in self.fields
            },
        }


def score_invoice_file(extracted_path: Path, reference_path: Path) -> InvoiceScore:
    document = InvoiceDocument.model_validate_json(extracted_path.read_text())
    reference = json.loads(reference_path.read_text(encoding="utf-8"))
    if isinstance(reference, list):
        reference = reference[0]
    return score_invoice(document, reference)


def score_invoice(document: InvoiceDocument, reference: dict[str, Any]) -> InvoiceScore:
    # A reference describes one invoice: compare it with the first one found.
    invoice: Invoice | None = document.invoices[0] if document.invoices else None
    score = InvoiceScore(invoices_found=len(document.invoices))
    if invoice is not None:
        score.verdict = invoice.verdict.value
        score.failed_checks = list(invoice.failed_checks)
    for ours, key in REFERENCE_KEYS.items():
        expected = reference.get(key)
        value = invoice.fields.get(ours) if invoice is not None else None
        if expected in (None, "") and value is None:
            continue
        normalise = NORMALISERS[ours]
        correct = (
            expected not in (None, "")
            and value is not None
            and normalise(value.value) == normalise(expected)
        )
        score.fields.append(
            FieldOutcome(
                field=ours,
                expected=None if expected in (None, "") else str(expected),
                found=None if value is None else value.value,
                correct=bool(correct),
            )
        )
    return score


@dataclass(frozen=True)
class FieldRates:
    field: str
    references: int  # documents whose reference has the field
    given: int  # of those, where a value was given
    correct: int

    @property
    def recall(self) -> float | None:
        return self.correct / self.references if self.references else None

    @property
    def precision(self) -> float | None:
        return self.correct / self.given if self.given else None

    def as_json(self) -> dict[str, Any]:
        return {
            "references": self.references,
            "given": self.given,
            "correct": self.correct,
            "recall": self.recall,
            "precision": self.precision,
        }


def field_rates(scores: Iterable[InvoiceScore]) -> list[FieldRates]:
    outcomes: dict[str, list[FieldOutcome]] = {name: [] for name in REFERENCE_KEYS}
    for score in scores:
        for outcome in score.fields:
            outcomes[outcome.field].append(outcome)
    rates = []
    for name, found in outcomes.items():
        judged = [outcome for outcome in found if outcome.expected is not None]
        if not judged:
            continue
        rates.append(
            FieldRates(
                field=name,
                references=len(judged),
                given=sum(outcome.found is not None for outcome in judged),
                correct=sum(outcome.correct for outcome in judged),
            )
        )
    return rates


def verdict_counts(scores: Iterable[InvoiceScore]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for score in scores:
        key = score.verdict or "no invoice"
        if score.failed_checks:
            key = f"{key} ({', '.join(score.failed_checks)})"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


class ScoredRun(Protocol):
    """What the grouping needs of a DocumentRun (cli/evaluation/runner.py)."""

    @property
    def invoice(self) -> InvoiceScore | None: ...

    @property
    def case(self) -> Any: ...


def invoice_scores_by_group(runs: Iterable[ScoredRun]) -> dict[str, list[InvoiceScore]]:
    """Scores by variant ("original", "noise", ...) and all scanned variants together."""
    groups: dict[str, list[InvoiceScore]] = {}
    for run in runs:
        if run.invoice is None:
            continue
        variant = run.case.variant
        groups.setdefault(variant, []).append(run.invoice)
        if variant != ORIGINAL:
            groups.setdefault(SCANNED, []).append(run.invoice)
    return groups


def summary_json(scores_by_group: dict[str, list[InvoiceScore]]) -> dict[str, Any]:
    return {
        group: {
            "documents": len(scores),
            "fields": {rates.field: rates.as_json() for rates in field_rates(scores)},
            "verdicts": verdict_counts(scores),
        }
        for group, scores in scores_by_group.items()
        if scores
    }


def rates_table(scores_by_group: dict[str, list[InvoiceScore]]) -> Table:
    table = Table(title="Invoice extraction (per field: correct / references; precision)")
    table.add_column("group")
    table.add_column("documents", justify="right")
    for name in REFERENCE_KEYS:
        table.add_column(name, justify="right")
    table.add_column("verdicts")
    for group, scores in scores_by_group.items():
        if not scores:
            continue
        by_field = {rates.field: rates for rates in field_rates(scores)}
        cells = []
        for name in REFERENCE_KEYS:
            rates = by_field.get(name)
            if rates is None:
                cells.append("")
                continue
            precision = "-" if rates.precision is None else f"{rates.precision:.2f}"
            cells.append(f"{rates.correct}/{rates.references}; {precision}")
        verdicts = "; ".join(f"{key}: {count}" for key, count in verdict_counts(scores).items())
        table.add_row(group, str(len(scores)), *cells, verdicts)
    return table
