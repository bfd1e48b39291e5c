"""The corpus' six born-digital invoices, read from their text layer's blocks."""

from __future__ import annotations

from datetime import date

import pytest

from pagemill.invoices import extract_invoices
from pagemill.invoices.schemas import Verdict
from pagemill.invoices.values import normalise_id
from tests.invoices.support import amount, corpus_blocks, corpus_truth

NAMES = ["AmazonWebServices", "AzureInterior", "FlipkartInvoice", "coolblue1", "oyo", "saeco"]


@pytest.mark.parametrize("name", NAMES)
def test_the_target_fields_match_the_reference(name: str) -> None:
    truth = corpus_truth(name)
    document = extract_invoices(corpus_blocks(name))
    assert len(document.invoices) == 1
    fields = document.invoices[0].fields
    assert normalise_id(fields["invoice_number"].value) == normalise_id(truth["invoice_number"])
    assert date.fromisoformat(fields["issue_date"].value) == date.fromisoformat(truth["date"])
    assert amount(fields["total"].value) == amount(truth["amount"])
    assert fields["currency"].value == truth["currency"]
    for field, key in [("due_date", "date_due")]:
        if key in truth:
            assert fields[field].value == truth[key]
    for field, key in [("subtotal", "amount_untaxed"), ("tax_amount", "amount_tax")]:
        if key in truth and field in fields:
            assert amount(fields[field].value) == amount(truth[key])


@pytest.mark.parametrize("name", NAMES)
def test_invoices_whose_numbers_add_up_are_consistent(name: str) -> None:
    invoice = extract_invoices(corpus_blocks(name)).invoices[0]
    assert invoice.verdict is Verdict.CONSISTENT, invoice.checks
    assert invoice.failed_checks == []


def test_each_value_says_where_it_was_read() -> None:
    pages = corpus_blocks("coolblue1")
    invoice = extract_invoices(pages).invoices[0]
    number = invoice.fields["invoice_number"]
    assert (number.printed, number.label, number.page) == ("993548900", "Factuurnummer:", 1)
    x0, y0, x1, y1 = number.box
    assert 100 < x0 < x1 < 160 and 150 < y0 < y1 < 170  # where the PDF draws it
    total = invoice.fields["total"]
    assert (total.printed, total.value) == ("€ 717,97", "717.97")
    assert invoice.fields["issue_date"].printed == "19 april 2014"
    assert all(0 <= value.confidence <= 1 for value in invoice.fields.values())


def test_line_items_of_a_table() -> None:
    invoice = extract_invoices(corpus_blocks("AzureInterior")).invoices[0]
    truth = [line for line in corpus_truth("AzureInterior")["lines"] if "price_subtotal" in line]
    items = invoice.line_items
    assert [amount(item.amount.value) for item in items if item.amount] == [
        amount(line["price_subtotal"]) for line in truth
    ]
    assert [amount(item.unit_price.value) for item in items if item.unit_price] == [
        amount(line["price_unit"]) for line in truth
    ]
    assert items[0].description is not None
    assert items[0].description.value.startswith("[17589684] Beeswax XL")
    assert items[2].discount_percent is not None
    assert amount(items[2].discount_percent.value) == amount(10)
    passed = [check for check in invoice.checks if check.name == "quantity_times_unit_price"]
    assert len(passed) == 4
