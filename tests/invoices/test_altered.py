"""Invoices whose printed numbers were changed on purpose: the verdict names the check
that fails, the values stay as printed, and their confidence falls."""

from __future__ import annotations

import pytest

from pagemill.invoices import extract_invoices
from pagemill.invoices.schemas import Invoice, Verdict
from tests.invoices.support import altered, corpus_blocks, pdf_blocks


def read_altered(name: str, changes: dict[str, str]) -> Invoice:
    with altered(name, changes) as document:
        return extract_invoices(pdf_blocks(document)).invoices[0]


def test_a_total_that_is_not_subtotal_plus_tax() -> None:
    original = extract_invoices(corpus_blocks("AzureInterior")).invoices[0]
    invoice = read_altered("AzureInterior", {"$ 279.84": "$ 297.84"})
    assert invoice.verdict is Verdict.INCONSISTENT
    assert invoice.failed_checks == ["subtotal_plus_tax_equals_total"]
    assert invoice.fields["total"].value == "297.84"  # reported as printed, never corrected
    assert invoice.fields["total"].confidence < original.fields["total"].confidence / 2 + 0.01
    assert invoice.fields["subtotal"].confidence < original.fields["subtotal"].confidence


def test_a_line_amount_that_is_not_quantity_times_price() -> None:
    invoice = read_altered("AzureInterior", {"$ 70.00": "$ 76.00"})
    assert invoice.verdict is Verdict.INCONSISTENT
    assert invoice.failed_checks == ["line_items_sum", "quantity_times_unit_price"]
    failed = [check for check in invoice.checks if check.status == "failed"]
    assert any("line_items[1].amount" in check.fields for check in failed)
    assert invoice.line_items[1].amount is not None
    assert invoice.line_items[1].amount.value == "76.00"


def test_a_due_date_before_the_issue_date() -> None:
    invoice = read_altered("saeco", {"22-9-2022": "22-8-2022"})
    assert invoice.fields["due_date"].value == "2022-08-22"
    assert invoice.failed_checks == ["due_date_not_before_issue_date"]


def test_two_currencies() -> None:
    invoice = read_altered("coolblue1", {"€ 124,61": "$ 124,61"})
    assert invoice.failed_checks == ["one_currency"]


@pytest.mark.parametrize("name", ["AzureInterior", "saeco"])
def test_the_unaltered_invoice_passes_the_same_checks(name: str) -> None:
    # The alteration, not the rewriting of the PDF, is what the checks see.
    with altered(name, {}) as document:
        assert extract_invoices(pdf_blocks(document)).invoices[0].verdict is Verdict.CONSISTENT
