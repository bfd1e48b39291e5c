"""Evaluation metrics against numbers worked out by hand on tiny fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pymupdf
import pytest

from pagemill.quality.metrics import (
    bag_of_words_error_rate,
    character_error_rate,
    invoice_field_recall,
    normalise_text,
    parse_table,
    table_agreement,
)

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"


# --- text ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("markdown", "text"),
    [
        ("# Title\n\nSome  **bold** and *it*  text.\n", "Title Some bold and it text."),
        ("| a | b |\n|:---|---:|\n| 1 | 2 |", "a b 1 2"),
        ("See [the site](https://example.com) ![logo](l.png)", "See the site logo"),
        ("- one\n- two\n1. three\n> quoted", "one two three quoted"),
        ("a <!-- image --> b <br> c", "a b c"),
        ("```python\nx = 1\n```", "x = 1"),
        ("snake_case_name and _emphasis_", "snake_case_name and emphasis"),
        ("\\*not emphasis\\* costs \\$5", "*not emphasis* costs $5"),
        # A ligature and full-width letters, folded.
        ("\ufb01nal \uff46\uff55\uff4c\uff4c width", "final full width"),
        ("text\n\n---\n\nmore", "text more"),
    ],
)
def test_normalise_text(markdown: str, text: str) -> None:
    assert normalise_text(markdown) == text


def test_character_error_rate() -> None:
    assert character_error_rate("Helo world", "Hello world") == pytest.approx(1 / 11)
    # Markup and spacing are not errors.
    assert character_error_rate("# **Hello**\n\n  world", "Hello world") == 0.0
    # Output three times as long as the reference: two references' worth of insertions.
    assert character_error_rate("abcabcabc", "abc") == pytest.approx(2.0)
    assert character_error_rate("", "") == 0.0
    assert character_error_rate("anything", "") == 1.0
    assert character_error_rate("", "abc") == 1.0


def test_bag_of_words_error_rate() -> None:
    reference = "the cat sat on the mat"
    # Reading order does not count.
    assert bag_of_words_error_rate("the mat sat on the cat", reference) == 0.0
    # One misread word of six: (|6 - 6| + |the: 2-1| + |a: 0-1|) / 12.
    assert bag_of_words_error_rate("the cat sat on a mat", reference) == pytest.approx(1 / 6)
    # Three words missing: (|6 - 3| + 3) / 12.
    assert bag_of_words_error_rate("the cat sat", reference) == pytest.approx(0.5)
    assert bag_of_words_error_rate("", "") == 0.0
    assert bag_of_words_error_rate("extra", "") == 1.0


# --- invoice fields -----------------------------------------------------------------------


def test_invoice_field_recall_on_a_tiny_invoice() -> None:
    markdown = "**Invoice No:** INV-7\n\nDate: 20/03/2023\n\n| Total | $ 1,939.00 |\n\nVAT 21 %"
    expected = [
        {
            "issuer": "Not On The Page Ltd",  # structural: skipped
            "desc": "Invoice from Not On The Page Ltd",  # structural: skipped
            "currency": "EUR",  # structural: skipped
            "invoice_number": "INV-7",
            "date": "2023-03-20",
            "amount": 1939.0,
            "vat_percent": 21,
            "amount_tax": 16.94,
            "lines": [{"name": "Widget", "qty": 1}],
        }
    ]
    recall = invoice_field_recall(markdown, expected)
    assert recall.found == ("invoice_number", "date", "amount", "vat_percent")
    assert recall.missing == ("amount_tax", "lines[0].name", "lines[0].qty")
    assert recall.recall == pytest.approx(4 / 7)


@pytest.mark.parametrize(
    "page", ["Rs 1939", "$ 1,939.00", "1.939,00 EUR", "1'939.00 CHF", "total: 1939.0"]
)
def test_amounts_match_however_they_are_written(page: str) -> None:
    assert invoice_field_recall(page, {"amount": 1939.0}).recall == 1.0
    assert invoice_field_recall(page, {"amount": "1939.00"}).recall == 1.0


@pytest.mark.parametrize("page", ["19.39", "Rs 1938", "1,93900"])
def test_other_amounts_do_not_match(page: str) -> None:
    assert invoice_field_recall(page, {"amount": 1939.0}).recall == 0.0


@pytest.mark.parametrize(
    "page",
    [
        "Invoice Date: August 3 , 2014",
        "Aug. 3rd 2014",
        "03/08/2014",
        "08/03/2014",
        "3-8-2014",
        "2014/08/03",
        "3 augustus 2014",
        "03.08.14",
        "3 août 2014",
    ],
)
def test_dates_match_in_usual_spellings(page: str) -> None:
    assert invoice_field_recall(page, {"date": "2014-08-03"}).recall == 1.0


@pytest.mark.parametrize("page", ["2014-08-04", "3 August 2015", "13/08/2014"])
def test_other_dates_do_not_match(page: str) -> None:
    assert invoice_field_recall(page, {"date": "2014-08-03"}).recall == 0.0


def test_invoice_field_recall_on_the_corpus_invoice_text_layer() -> None:
    expected = json.loads((CORPUS / "AzureInterior.json").read_text())
    with pymupdf.open(CORPUS / "AzureInterior.pdf") as document:
        text = document[0].get_text()
    recall = invoice_field_recall(text, expected)
    # These values come from the invoice's embedded e-invoice data and are not printed on
    # the page (checked by reading it): no reader of the page can find them.
    assert set(recall.missing) == {
        "partner_street2",
        "partner_street3",
        "partner_ref",
        "bic",
        "mandate_id",
        "customer_order_number",
        "purchase_order_id",
        "mobile",
        "partner_coc",
        "date_start",
        "date_end",
    }
    # Printed in other spellings: 03/20/2023 for 2023-03-20, "$ 279.84" for 279.84.
    assert {"date", "date_due", "amount", "amount_tax", "lines[1].name"} <= set(recall.found)
    assert recall.recall == pytest.approx(len(recall.found) / (len(recall.found) + 11))


# --- tables -------------------------------------------------------------------------------

REFERENCE = "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n"


def test_parse_table_drops_the_separator() -> None:
    assert parse_table("intro\n\n" + REFERENCE) == [["a", "b"], ["1", "2"], ["3", "4"]]
    assert parse_table("no table") == []


def test_identical_tables_agree_fully() -> None:
    agreement = table_agreement("| **a** | b |\n|:-|-:|\n| 1 | 2 |\n| 3 | 4 |", REFERENCE)
    assert (agreement.rows, agreement.columns, agreement.cells) == (1.0, 1.0, 1.0)
    assert agreement.reference_shape == agreement.hypothesis_shape == (3, 2)


def test_a_missing_row_costs_that_row_only() -> None:
    agreement = table_agreement("| a | b |\n|---|---|\n| 3 | 4 |", REFERENCE)
    assert agreement.rows == pytest.approx(2 / 3)
    assert agreement.columns == 1.0
    # The header and "3 | 4" align with their reference rows: 4 equal cells of 3 x 2.
    assert agreement.cells == pytest.approx(4 / 6)


def test_an_extra_column_and_a_misread_cell() -> None:
    hypothesis = "| a | b | c |\n|---|---|---|\n| 1 | 2 | x |\n| 3 | 5 | y |"
    agreement = table_agreement(hypothesis, REFERENCE)
    assert agreement.hypothesis_shape == (3, 3)
    assert agreement.columns == pytest.approx(2 / 3)
    # Equal cells: a, b, 1, 2, 3; "5" for "4" shares nothing; the grid is 3 x 3.
    assert agreement.cells == pytest.approx(5 / 9)


def test_cell_text_is_compared_by_similarity() -> None:
    agreement = table_agreement("| Tota1 |\n|---|", "| Total |\n|---|")
    # Indel similarity: 1 - (1 deletion + 1 insertion) / (5 + 5) characters.
    assert agreement.cells == pytest.approx(0.8)


def test_no_table_in_the_output_agrees_with_nothing() -> None:
    agreement = table_agreement("The engine wrote prose.", REFERENCE)
    assert (agreement.rows, agreement.columns, agreement.cells) == (0.0, 0.0, 0.0)
