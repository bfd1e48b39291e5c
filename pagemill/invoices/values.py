"""Reading values out of printed text: amounts, currencies, dates, rates and ids.

Amounts are read by price-parser and dates with month names by dateparser (both BSD),
chosen by measurement on the corpus' printed strings and a set in the six languages:
price-parser read 15 of 16 amounts (babel's parse_decimal 7-8, as it needs the
locale up front) and dateparser 16 of 16 dates (dateutil 10). Currency symbols and
codes come from babel's CLDR data. All-digit dates are read here, in the order the
document itself shows (see `DateOrder`), since no library can know it from one date.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from functools import cache

from babel import Locale
from babel.numbers import list_currencies
from dateparser.date import DateDataParser
from price_parser import Price

LANGUAGES = ["en", "de", "fr", "nl", "es", "it"]

# Printed forms CLDR's English names do not give, or gives to several currencies.
_EXTRA_SYMBOLS = {"rs": "INR", "rs.": "INR", "₹": "INR", "us$": "USD", "€": "EUR"}

# Thousands grouped by a point, comma, apostrophe or (narrow) no-break space; or by a
# plain space when decimals follow ("1 000,00", French style), since "1 278.61" with
# one space is as often a quantity beside a price.
_NUMBER = (
    r"(?<![\w.,/])(?:\d{1,3}(?: \d{3})+[.,]\d{2}"
    r"|(?:\d{1,3}(?:[.,'\u2019\u00a0\u202f]\d{3})+|\d+)(?:[.,]\d{1,2})?)"
    r"(?![\w%/]|[.,]\d|\s*%)"
)
_SYMBOL = r"(?:US\$|CA\$|A\$|AU\$|NZ\$|HK\$|[$€£¥₹]|Rs\.?|\b[A-Z]{3}\b)"
_MONEY = re.compile(
    rf"(?P<neg1>[-\u2212])?\s*(?P<pre>{_SYMBOL})?\s*(?P<neg2>[-\u2212])?\s*(?P<num>{_NUMBER})"
    rf"(?:\s*(?P<post>{_SYMBOL})(?!\s*[-\u2212]?\d))?(?P<neg3>-(?!\d))?"
)
_RATE = re.compile(r"(?<![\w.,])(\d{1,2}(?:[.,]\d{1,3})?)\s*%")
_NUMERIC_DATE = re.compile(
    r"(?<![\w./-])(?:(?P<y1>\d{4})[./-](?P<m1>\d{1,2})[./-](?P<d1>\d{1,2})"
    r"|(?P<a>\d{1,2})[./-](?P<b>\d{1,2})[./-](?P<y2>\d{4}|\d{2}))(?![\w/-]|\.\d)"
)
_WORD_DATE = re.compile(
    r"(?<!\w)(?:\d{1,2}(?:st|nd|rd|th|er|\.)?\s*(?:de\s+)?[^\W\d_]{3,10}\.?\s*(?:de\s+)?,?\s*\d{4}"
    r"|[^\W\d_]{3,10}\.?\s*\d{1,2}(?:st|nd|rd|th)?\s*,?\s*\d{4})(?!\w)"
)
_ID = re.compile(
    r"^[#:.\s]*(?:(?:no|nr|n°|n)[.:]?\s+)?#?\s*([A-Za-z0-9][A-Za-z0-9/_\-.]{1,39})", re.IGNORECASE
)


class DateOrder(StrEnum):
    DMY = "DMY"
    MDY = "MDY"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Money:
    amount: Decimal
    currency: str | None
    printed: str
    start: int
    end: int
    symbol: str | None = None  # the currency as printed beside the amount


@dataclass(frozen=True)
class ReadDate:
    value: date
    printed: str
    ambiguous: bool  # day and month could be swapped and the document did not say which


@cache
def _symbol_codes() -> dict[str, str]:
    symbols: dict[str, str] = {}
    for code, symbol in Locale("en").currency_symbols.items():
        if symbol != code and len(code) == 3:
            symbols.setdefault(symbol.lower(), code)
    symbols.update(_EXTRA_SYMBOLS)
    return symbols


@cache
def _iso_codes() -> frozenset[str]:
    return frozenset(list_currencies())


def currency_code(token: str | None) -> str | None:
    if not token:
        return None
    stripped = token.strip()
    if stripped.upper() == stripped and stripped in _iso_codes():
        return stripped
    return _symbol_codes().get(stripped.lower())


def find_money(text: str) -> list[Money]:
    found = []
    for match in _MONEY.finditer(text):
        pre, post = match.group("pre"), match.group("post")
        # A word of three capitals that is no currency ("VAT 12.00") is not part of it.
        currency = currency_code(pre) or currency_code(post)
        amount = parse_decimal(match.group("num"))
        if amount is None:
            continue
        if match.group("neg1") or match.group("neg2") or match.group("neg3"):
            amount = -amount
        start = match.start("num") if not currency_code(pre) else match.start()
        printed = text[start : match.end()].strip()
        symbol = pre if currency_code(pre) else post if currency_code(post) else None
        found.append(Money(amount, currency, printed, start, match.end(), symbol))
    return found


def money_outside_dates(text: str) -> list[Money]:
    """Amounts in the text that are not part of a date printed beside them."""
    dates = [match.span() for match in _NUMERIC_DATE.finditer(text)]
    dates += [match.span() for match in _WORD_DATE.finditer(text)]
    return [
        money
        for money in find_money(text)
        if not any(start < money.end and money.start < end for start, end in dates)
    ]


def parse_decimal(number: str) -> Decimal | None:
    cleaned = re.sub(r"[\s\u00a0\u202f]", "", number).replace("\u2019", "'")
    price = Price.fromstring(cleaned)
    if price.amount is None:
        return None
    try:
        return Decimal(price.amount)
    except InvalidOperation:
        return None


def find_rate(text: str) -> tuple[Decimal, str] | None:
    match = _RATE.search(text)
    if match is None:
        return None
    value = Decimal(match.group(1).replace(",", "."))
    return (value, match.group()) if value <= 100 else None


def parse_plain_number(text: str) -> Decimal | None:
    match = re.fullmatch(r"\s*([-\u2212]?\d+(?:[.,]\d+)?)\s*", text)
    if match is None:
        return None
    return Decimal(match.group(1).replace("\u2212", "-").replace(",", "."))


def numeric_date_parts(text: str) -> list[tuple[int, int]]:
    """(first, second) of each d/m or m/d date in the text, for `DateOrder` evidence."""
    return [
        (int(match.group("a")), int(match.group("b")))
        for match in _NUMERIC_DATE.finditer(text)
        if match.group("a")
    ]


def find_date(text: str, order: DateOrder) -> ReadDate | None:
    numeric = _NUMERIC_DATE.search(text)
    if numeric is not None:
        return _numeric_date(numeric, order)
    for match in _WORD_DATE.finditer(text):
        read = _word_date(match.group())
        if read is not None:
            return ReadDate(read, match.group().strip(), ambiguous=False)
    return None


def _numeric_date(match: re.Match[str], order: DateOrder) -> ReadDate | None:
    printed = match.group()
    if match.group("y1"):
        return _make_date(
            int(match.group("y1")),
            int(match.group("m1")),
            int(match.group("d1")),
            printed,
            ambiguous=False,
        )
    first, second = int(match.group("a")), int(match.group("b"))
    year = int(match.group("y2"))
    year += 2000 if year < 100 else 0
    if first > 12 or (order is DateOrder.DMY and second <= 12):
        return _make_date(year, second, first, printed, ambiguous=False)
    if second > 12 or order is DateOrder.MDY:
        return _make_date(year, first, second, printed, ambiguous=False)
    # Unknown order and both could be a month: only the same day and month is certain.
    return _make_date(year, second, first, printed, ambiguous=first != second)


def _make_date(year: int, month: int, day: int, printed: str, ambiguous: bool) -> ReadDate | None:
    if not 1900 <= year <= 2200:
        return None
    try:
        return ReadDate(date(year, month, day), printed.strip(), ambiguous)
    except ValueError:
        return None


@cache
def _date_parser() -> DateDataParser:
    return DateDataParser(
        languages=LANGUAGES,
        settings={"REQUIRE_PARTS": ["day", "month", "year"], "PREFER_DAY_OF_MONTH": "first"},
    )


def _word_date(text: str) -> date | None:
    # dateparser reads "August 3 , 2014" only without the space before the comma.
    cleaned = re.sub(r"\s+,", ",", text)
    result = _date_parser().get_date_data(cleaned)
    return result.date_obj.date() if result.date_obj is not None else None


def find_id(text: str) -> str | None:
    """An invoice or order number: a token with a digit that is no date or amount."""
    match = _ID.match(text)
    if match is None:
        return None
    token = match.group(1).rstrip(".-/")
    if not any(char.isdigit() for char in token) or len(token) < 3:
        return None
    if re.fullmatch(r"\d+[.,]\d{1,2}", token) or _NUMERIC_DATE.fullmatch(token):
        return None
    return token


def normalise_id(text: str) -> str:
    return re.sub(r"[\s#]", "", text).upper()
