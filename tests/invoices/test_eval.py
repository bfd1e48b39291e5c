"""`pagemill eval`'s invoice scoring: exact after normalisation, per field."""

from __future__ import annotations

from cli.evaluation.invoices import field_rates, score_invoice, verdict_counts
from pagemill.invoices import extract_invoices
from tests.invoices.support import corpus_blocks, corpus_truth


def test_every_field_of_a_correct_extraction_scores() -> None:
    score = score_invoice(
        extract_invoices(corpus_blocks("AzureInterior")), corpus_truth("AzureInterior")
    )
    outcomes = {outcome.field: outcome for outcome in score.fields}
    assert all(outcome.correct for outcome in outcomes.values()), outcomes
    # "279.84" against 279.84, "2023-03-20" against "2023-03-20": compared normalised.
    assert outcomes["total"].expected == "279.84"
    assert score.verdict == "consistent"


def test_a_wrong_value_costs_precision_and_a_missing_one_only_recall() -> None:
    document = extract_invoices(corpus_blocks("saeco"))
    fields = document.invoices[0].fields
    fields["total"] = fields["total"].model_copy(update={"value": "94.99"})
    del fields["issue_date"]
    score = score_invoice(document, corpus_truth("saeco"))
    rates = {rates.field: rates for rates in field_rates([score])}
    assert (rates["total"].recall, rates["total"].precision) == (0.0, 0.0)
    assert (rates["issue_date"].recall, rates["issue_date"].precision) == (0.0, None)
    assert (rates["invoice_number"].recall, rates["invoice_number"].precision) == (1.0, 1.0)
    assert verdict_counts([score]) == {"consistent": 1}


def test_a_number_printed_with_a_hash_matches_the_reference() -> None:
    score = score_invoice(
        extract_invoices(corpus_blocks("FlipkartInvoice")), corpus_truth("FlipkartInvoice")
    )
    number = next(outcome for outcome in score.fields if outcome.field == "invoice_number")
    assert (number.expected, number.found, number.correct) == (
        "#BLR_WFLD20151000982590",
        "BLR_WFLD20151000982590",
        True,
    )
