"""From a document's blocks to its invoices: split, read, check."""

from __future__ import annotations

from pagemill.documents.blocks import PageBlocks
from pagemill.invoices.checks import run_checks
from pagemill.invoices.fields import read_fields, read_rate, span_box
from pagemill.invoices.items import find_line_items
from pagemill.invoices.labels import Hit, below, document_language, find_hits, right_of
from pagemill.invoices.layout import Segment, page_segments
from pagemill.invoices.parties import read_parties
from pagemill.invoices.schemas import FieldValue, Invoice, InvoiceDocument
from pagemill.invoices.split import split_pages
from pagemill.invoices.values import DateOrder, Money, find_money, numeric_date_parts

# A currency read from amounts anywhere on the invoice rather than beside its total.
DOCUMENT_CURRENCY = 0.8
TAX_RATE_WEIGHT = 0.9
# English is written day-first in most of the world and month-first in the US:
# only the document's own dates can tell. The other five languages are day-first.
DAY_FIRST_LANGUAGES = {"de", "fr", "nl", "es", "it"}


def extract_invoices(pages: list[PageBlocks]) -> InvoiceDocument:
    segments_by_page = {page.page: page_segments(page) for page in pages}
    document = InvoiceDocument()
    for group in split_pages(segments_by_page):
        segments = [segment for page in group for segment in segments_by_page[page]]
        document.invoices.append(extract_invoice(segments, group[0], group[-1]))
    return document


def extract_invoice(segments: list[Segment], first_page: int, last_page: int) -> Invoice:
    hits = find_hits(segments)
    language = document_language(hits)
    invoice = Invoice(first_page=first_page, last_page=last_page, language=language)
    invoice.line_items = find_line_items(segments, hits)
    order = date_order(segments, language)
    fields, money = read_fields(hits, segments, order)
    currencies = _currencies(segments) | {
        found.currency for found in money.values() if found.currency is not None
    }
    currency = _currency(money, fields, segments, currencies)
    if currency is not None:
        fields["currency"] = currency
    tax_rate = _tax_rate(hits, segments)
    if tax_rate is not None:
        fields["tax_rate"] = tax_rate
    invoice.fields = dict(sorted(fields.items()))
    invoice.seller, invoice.buyer = read_parties(hits, segments)
    run_checks(invoice, currencies)
    return invoice


def date_order(segments: list[Segment], language: str | None) -> DateOrder:
    day_first = month_first = False
    for segment in segments:
        for first, second in numeric_date_parts(segment.text):
            day_first |= first > 12 >= second
            month_first |= second > 12 >= first
    if day_first != month_first:
        return DateOrder.DMY if day_first else DateOrder.MDY
    if not day_first and language in DAY_FIRST_LANGUAGES:
        return DateOrder.DMY
    return DateOrder.UNKNOWN


def _currencies(segments: list[Segment]) -> set[str]:
    return {
        money.currency
        for segment in segments
        for money in find_money(segment.text)
        if money.currency is not None
    }


def _currency(
    money: dict[str, Money],
    fields: dict[str, FieldValue],
    segments: list[Segment],
    currencies: set[str],
) -> FieldValue | None:
    for field in ("total", "amount_due", "subtotal", "tax_amount"):
        found = money.get(field)
        if found is None or found.currency is None:
            continue
        if found.symbol is not None:
            # The symbol printed with the amount itself, not with an equal amount elsewhere.
            beside = [segment for segment in segments if _holds(segment, fields[field])]
            return _currency_value(found, beside or segments, 1.0)
        return _code_value(found, segments)
    if len(currencies) != 1:
        return None  # none printed, or several: no guess
    for segment in segments:
        for found in find_money(segment.text):
            if found.currency is not None:
                return _currency_value(found, [segment], DOCUMENT_CURRENCY)
    return None


def _currency_value(found: Money, segments: list[Segment], weight: float) -> FieldValue | None:
    symbol = found.symbol or ""
    for segment in segments:
        start = segment.text.find(found.printed)
        if start < 0 or not symbol:
            continue
        start += found.printed.find(symbol)
        return FieldValue(
            printed=symbol,
            value=found.currency or "",
            page=segment.page,
            box=span_box(segment, start, len(symbol)),
            source_text=segment.text,
            confidence=round(weight * segment.confidence, 3),
        )
    return None


def _holds(segment: Segment, value: FieldValue) -> bool:
    x0, y0, x1, y1 = value.box
    return (
        segment.page == value.page
        and segment.box[0] <= x1
        and x0 <= segment.box[2]
        and segment.box[1] <= y1
        and y0 <= segment.box[3]
    )


def _code_value(found: Money, segments: list[Segment]) -> FieldValue | None:
    """The currency printed as a code beside the amount's label."""
    code = found.currency or ""
    for segment in segments:
        start = segment.text.find(code)
        if start >= 0 and code:
            return FieldValue(
                printed=code,
                value=code,
                page=segment.page,
                box=span_box(segment, start, len(code)),
                source_text=segment.text,
                confidence=round(segment.confidence, 3),
            )
    return None


def _tax_rate(hits: list[Hit], segments: list[Segment]) -> FieldValue | None:
    label_segments = {id(hit.segment) for hit in hits}
    for hit in hits:
        if hit.label.field != "tax_amount" or hit.segment.in_table:
            continue
        places = [(hit.segment, hit.segment.text)]
        places += [(segment, segment.text) for segment in right_of(hit, segments, label_segments)]
        if "%" in hit.segment.text:
            under = below(hit, segments, label_segments)
            if under is not None:
                places.append((under, under.text))
        for segment, text in places:
            read = read_rate(text)
            if read is None:
                continue
            printed, value, start = read
            return FieldValue(
                printed=printed,
                value=value,
                page=segment.page,
                box=span_box(segment, start, len(printed)),
                source_text=segment.text,
                label=hit.printed_label,
                confidence=round(hit.label.weight * TAX_RATE_WEIGHT * segment.confidence, 3),
            )
    return None
