from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from pagemill.invoices.values import DateOrder, currency_code, find_date, find_id, find_money


@pytest.mark.parametrize(
    ("text", "amount", "currency"),
    [
        ("$4.11", "4.11", "USD"),
        ("€ 717,97", "717.97", "EUR"),
        ("€ -9,32", "-9.32", "EUR"),
        ("Rs 1939", "1939", "INR"),
        ("1.234,56 €", "1234.56", "EUR"),
        ("1,234.56 USD", "1234.56", "USD"),
        ("CHF 1'234.50", "1234.50", "CHF"),
        ("£12.00", "12.00", "GBP"),
        ("VAT 12.00", "12.00", None),
    ],
)
def test_amounts_and_their_currency(text: str, amount: str, currency: str | None) -> None:
    found = find_money(text)[-1]
    assert found.amount == Decimal(amount)
    assert found.currency == currency


def test_a_percentage_or_a_tax_id_is_no_amount() -> None:
    assert find_money("15.00 %") == []
    assert find_money("BTW NL810433941B01") == []


@pytest.mark.parametrize(
    ("text", "order", "expected", "ambiguous"),
    [
        ("August 3 , 2014", DateOrder.UNKNOWN, date(2014, 8, 3), False),
        ("19 april 2014", DateOrder.UNKNOWN, date(2014, 4, 19), False),
        ("12. März 2024", DateOrder.UNKNOWN, date(2024, 3, 12), False),
        ("3 février 2023", DateOrder.UNKNOWN, date(2023, 2, 3), False),
        ("15 de enero de 2022", DateOrder.UNKNOWN, date(2022, 1, 15), False),
        ("7 settembre 2021", DateOrder.UNKNOWN, date(2021, 9, 7), False),
        ("03/20/2023", DateOrder.UNKNOWN, date(2023, 3, 20), False),
        ("8-9-2022", DateOrder.DMY, date(2022, 9, 8), False),
        ("8-9-2022", DateOrder.MDY, date(2022, 8, 9), False),
        ("8-9-2022", DateOrder.UNKNOWN, date(2022, 9, 8), True),
        ("2024-01-31", DateOrder.UNKNOWN, date(2024, 1, 31), False),
    ],
)
def test_dates(text: str, order: DateOrder, expected: date, ambiguous: bool) -> None:
    read = find_date(text, order)
    assert read is not None
    assert (read.value, read.ambiguous) == (expected, ambiguous)


def test_ids_need_a_digit_and_are_no_date_or_amount() -> None:
    assert find_id(": # BLR_WFLD20151000982590") == "BLR_WFLD20151000982590"
    assert find_id("INV/2023/03/0008") == "INV/2023/03/0008"
    assert find_id("No. 12345") == "12345"
    assert find_id("Summary") is None
    assert find_id("49,99") is None
    assert find_id("20-10-2015") is None


def test_currency_codes_come_from_cldr() -> None:
    assert currency_code("EUR") == "EUR"
    assert currency_code("€") == "EUR"
    assert currency_code("VAT") is None
    assert currency_code("ALL") == "ALL"  # only when printed beside an amount
