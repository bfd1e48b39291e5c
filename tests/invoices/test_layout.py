from __future__ import annotations

import pytest

from pagemill.invoices import extract_invoices
from tests.invoices.support import written_page

# Labels at the left, amounts at the right margin, one line apart: on a page tilted by
# 2 degrees (0.035), an amount 400 points to the right drops 14 points, more than a line.
TOTALS = [
    (40, 100, "Invoice number: 2024-77 with a long line of words to measure the tilt"),
    (40, 130, "A second line of ordinary words across the page for the tilt"),
    (40, 160, "And a third line of ordinary words across the page as well"),
    (40, 300, "Subtotal"),
    (440, 300, "100.00 EUR"),
    (40, 315, "VAT 20%"),
    (440, 315, "20.00 EUR"),
    (40, 330, "Total"),
    (440, 330, "120.00 EUR"),
    (40, 345, "Paid"),
    (440, 345, "120.00 EUR"),
]


@pytest.mark.parametrize("tilt", [0.0, 0.035, -0.035])
def test_values_beside_their_labels_on_a_tilted_page(tilt: float) -> None:
    invoice = extract_invoices([written_page(TOTALS, tilt=tilt)]).invoices[0]
    fields = {name: value.value for name, value in invoice.fields.items()}
    assert (fields["subtotal"], fields["tax_amount"], fields["total"]) == (
        "100.00",
        "20.00",
        "120.00",
    )
    assert invoice.verdict == "consistent"


def test_a_line_without_an_amount_leaves_the_sum_unchecked() -> None:
    page = written_page(
        [
            (40, 100, "Invoice no: 55"),
            (40, 200, "Description"),
            (300, 200, "Qty"),
            (360, 200, "Unit price"),
            (460, 200, "Amount"),
            (40, 215, "Widget"),
            (300, 215, "2"),
            (360, 215, "5.00"),
            (460, 215, "10.00"),
            (40, 230, "Gadget"),
            (300, 230, "1"),
            (360, 230, "7.00"),
            (40, 260, "Total"),
            (460, 260, "17.00"),
        ]
    )
    invoice = extract_invoices([page]).invoices[0]
    assert [item.amount.value if item.amount else None for item in invoice.line_items] == [
        "10.00",
        None,
    ]
    checks = {check.name: check.status for check in invoice.checks}
    assert checks["line_items_sum"] == "not_applicable"
