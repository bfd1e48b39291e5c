"""Header fields: each value found where it sits relative to its label.

A label's value is read from the rest of its own line, else from the segments to its
right on the same row (up to the next label), else from the segment just under it.
Every label that finds a value proposes a candidate; the best-scored one wins, and a
disagreeing runner-up lowers its confidence (see README, "Invoice data").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date

from pagemill.invoices.labels import Hit, below, right_of
from pagemill.invoices.layout import Segment
from pagemill.invoices.schemas import FieldValue
from pagemill.invoices.values import (
    DateOrder,
    Money,
    currency_code,
    find_date,
    find_id,
    find_rate,
    money_outside_dates,
)

DATE_FIELDS = ("issue_date", "due_date")
AMOUNT_FIELDS = ("subtotal", "tax_amount", "total", "amount_due")
ID_FIELDS = ("invoice_number", "purchase_order", "payment_reference")
# Totals are printed last and restated earlier ("Subtotal" per section, then overall):
# among equal candidates the last one on the page wins; header fields, the first.
LAST_WINS = set(AMOUNT_FIELDS)

# Weights of where a value was found beside its label.
INLINE, RIGHT, BELOW = 1.0, 1.0, 0.9
# A date whose day and month could be swapped, the document giving no order.
AMBIGUOUS_DATE = 0.5
# An amount printed with neither decimals nor a currency might be a count or a code.
BARE_AMOUNT = 0.85
# The best candidate when another, scored nearly as well, says something else.
CONFLICT = 0.75


@dataclass(frozen=True)
class Candidate:
    field: str
    value: FieldValue
    money: Money | None = None
    order: tuple[int, float, float] = (0, 0.0, 0.0)  # page, y, x
    # How surely the label and the value's place name the field, without the engine's
    # own confidence in the characters, which differs by a few hundredths from line to
    # line of a scan and must not decide between two labels as sure as each other.
    score: float = 0.0


@dataclass(frozen=True)
class Reading:
    """A value read from a span of one segment."""

    printed: str
    value: str
    start: int
    quality: float
    money: Money | None = None


def read_fields(
    hits: list[Hit], segments: list[Segment], order: DateOrder
) -> tuple[dict[str, FieldValue], dict[str, Money]]:
    label_segments = {id(hit.segment) for hit in hits}
    candidates: dict[str, list[Candidate]] = {}
    for hit in hits:
        if hit.segment.in_table:
            continue
        reader = _reader(hit.label.field, order)
        if reader is None:
            continue
        candidate = _locate(hit, segments, label_segments, reader)
        if candidate is not None:
            candidates.setdefault(hit.label.field, []).append(candidate)
    values: dict[str, FieldValue] = {}
    money: dict[str, Money] = {}
    for field, found in candidates.items():
        chosen = _choose(field, found)
        values[field] = chosen.value
        if chosen.money is not None:
            money[field] = chosen.money
    return values, money


def _reader(field: str, order: DateOrder) -> Callable[[str], Reading | None] | None:
    if field in DATE_FIELDS:
        return lambda text: _read_date(text, order)
    if field in AMOUNT_FIELDS:
        return _read_amount
    if field in ID_FIELDS:
        return _read_id
    return None


def _locate(
    hit: Hit,
    segments: list[Segment],
    label_segments: set[int],
    reader: Callable[[str], Reading | None],
) -> Candidate | None:
    places: list[tuple[Segment, int, str, float]] = []
    right = right_of(hit, segments, label_segments)
    inline = (hit.segment, hit.remainder_start, hit.remainder, INLINE)
    if hit.label.field in AMOUNT_FIELDS:
        # The amounts column is the rightmost: "Total  1  278.61  40.39  319.00".
        places += [(segment, 0, segment.text, RIGHT) for segment in reversed(right)]
        places.append(inline)
    else:
        places.append(inline)
        places += [(segment, 0, segment.text, RIGHT) for segment in right]
    under = below(hit, segments, label_segments)
    if under is not None:
        places.append((under, 0, under.text, BELOW))
    for segment, offset, text, weight in places:
        reading = reader(text)
        if reading is None:
            continue
        if reading.money is not None and reading.money.currency is None:
            reading = _with_label_currency(reading, hit.remainder)
        score = hit.label.weight * weight * reading.quality
        confidence = score * segment.confidence
        value = FieldValue(
            printed=reading.printed,
            value=reading.value,
            page=segment.page,
            box=span_box(segment, offset + reading.start, len(reading.printed)),
            source_text=segment.text,
            label=hit.printed_label,
            confidence=round(min(1.0, confidence), 3),
        )
        return Candidate(
            hit.label.field,
            value,
            reading.money,
            (segment.page, segment.top, segment.box[0]),
            score,
        )
    return None


def _with_label_currency(reading: Reading, remainder: str) -> Reading:
    """ "Factuur totaal EUR  49,99": the currency printed with the label, not the amount."""
    for token in remainder.split():
        code = currency_code(token.strip(".:,;()"))
        if code is not None and reading.money is not None:
            return replace(reading, money=replace(reading.money, currency=code))
    return reading


def _choose(field: str, found: list[Candidate]) -> Candidate:
    last = field in LAST_WINS

    def rank(candidate: Candidate) -> tuple[float, tuple[int, float, float]]:
        page, y, x = candidate.order
        where = (page, y, x) if last else (-page, -y, -x)
        return (round(candidate.score, 2), where)

    ordered = sorted(found, key=rank, reverse=True)
    best = ordered[0]
    rivals = [
        other
        for other in ordered[1:]
        if other.value.value != best.value.value and other.score >= best.score - 0.1
    ]
    if not rivals:
        return best
    lowered = best.value.model_copy(
        update={"confidence": round(best.value.confidence * CONFLICT, 3)}
    )
    return Candidate(best.field, lowered, best.money, best.order, best.score)


def _read_date(text: str, order: DateOrder) -> Reading | None:
    read = find_date(text, order)
    if read is None:
        return None
    quality = AMBIGUOUS_DATE if read.ambiguous else 1.0
    return Reading(read.printed, read.value.isoformat(), text.find(read.printed), quality)


def _read_amount(text: str) -> Reading | None:
    found = money_outside_dates(text)
    if not found:
        return None
    money = found[-1]
    bare = money.currency is None and "." not in money.printed and "," not in money.printed
    quality = BARE_AMOUNT if bare else 1.0
    return Reading(money.printed, str(money.amount), money.start, quality, money)


def _read_id(text: str) -> Reading | None:
    token = find_id(text)
    if token is None:
        return None
    return Reading(token, token, text.find(token), 1.0)


def read_rate(text: str) -> tuple[str, str, int] | None:
    found = find_rate(text)
    if found is None:
        return None
    value, printed = found
    return printed, f"{value.normalize():f}", text.find(printed)


def span_box(segment: Segment, start: int, length: int) -> tuple[float, float, float, float]:
    """The box of the words under text[start:start+length] of the segment."""
    if not segment.words or start < 0:
        return segment.box
    end = start + length
    boxes = []
    position = 0
    for word in segment.words:
        word_end = position + len(word.text)
        if position < end and start < word_end:
            boxes.append(word.box)
        position = word_end + 1
    if not boxes:
        return segment.box
    return (
        min(box[0] for box in boxes),
        min(box[1] for box in boxes),
        max(box[2] for box in boxes),
        max(box[3] for box in boxes),
    )


def parse_iso_date(value: FieldValue | None) -> date | None:
    return date.fromisoformat(value.value) if value is not None else None
