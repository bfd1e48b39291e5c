"""Line items: the rows under a header whose words name item columns.

A header row is found by its words ("Description  Qty  Unit price  Amount", in any of
the six languages), each word or phrase giving its column's span; the words of the
rows below go to the column whose span they overlap, or the nearest. A row with an
amount starts an item, a row with only text continues the item above it (a second
line of its description), and the table ends at the total's row or a wide gap.
Found on the blocks layer, so it reads a text layer's table and an OCR'd one alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pagemill.documents.blocks import Box
from pagemill.invoices.fields import span_box
from pagemill.invoices.labels import Hit
from pagemill.invoices.layout import Segment, same_row
from pagemill.invoices.lexicon import COLUMN_LABELS, ITEM_INCLUDED_MARKERS, normalise_label
from pagemill.invoices.schemas import FieldValue, LineItem
from pagemill.invoices.values import find_money, find_rate, parse_plain_number

MIN_COLUMNS = 3
# Most of a header row's words must be column names, or it is a sentence.
MIN_HEADER_SHARE = 0.6
# The table ends at a gap wider than this many header heights.
MAX_ROW_GAP_HEIGHTS = 6.0
# A text-only row continues the item above when it follows within this many heights.
CONTINUATION_GAP_HEIGHTS = 1.6
STOP_FIELDS = {"total", "amount_due"}
SKIP_FIELDS = {"subtotal", "tax_amount"}


@dataclass
class Token:
    text: str
    box: Box
    segment: Segment
    index: int  # the word's place in its segment, for boxes of spans


@dataclass
class Column:
    kind: str
    x0: float
    x1: float


@dataclass
class Table:
    columns: list[Column]
    header: list[Segment]
    rows: list[list[Token]] = field(default_factory=list)


def find_line_items(segments: list[Segment], hits: list[Hit]) -> list[LineItem]:
    rows = _rows(segments)
    stop_rows, skip_rows = _label_rows(rows, hits)
    items: list[LineItem] = []
    index = 0
    while index < len(rows):
        columns = _header_columns(rows[index])
        if columns is None:
            index += 1
            continue
        for segment in rows[index]:
            segment.in_table = True
        index += 1
        header_height = max(segment.height for segment in rows[index - 1])
        previous_bottom = rows[index - 1][0].bottom
        page = rows[index - 1][0].page
        last_item: LineItem | None = None
        # Subtotal rows are no items; those with items after them are a section's
        # ("Subtotal" per group of items) and belong to the table, not to the invoice.
        passed_over: list[Segment] = []
        while index < len(rows) and rows[index][0].page == page:
            row = rows[index]
            if index in stop_rows:
                break
            top = min(segment.top for segment in row)
            if top - previous_bottom > MAX_ROW_GAP_HEIGHTS * header_height:
                break
            if _header_columns(row) is not None:
                break  # the next table's header
            index += 1
            if index - 1 in skip_rows:
                passed_over.extend(row)
                continue
            gap = top - previous_bottom
            previous_bottom = max(segment.bottom for segment in row)
            for segment in row:
                segment.in_table = True
            cells = _cells(row, columns)
            item = _item(cells)
            if item is not None:
                items.append(item)
                last_item = item
                for segment in passed_over:
                    segment.in_table = True
                passed_over = []
            elif last_item is not None and gap <= CONTINUATION_GAP_HEIGHTS * header_height:
                _continue_description(last_item, cells.get("description", []))
    _mark_included(items)
    return items


def _rows(segments: list[Segment]) -> list[list[Segment]]:
    rows: list[list[Segment]] = []
    for segment in sorted(segments, key=lambda s: (s.page, s.centre_y, s.box[0])):
        if rows and rows[-1][0].page == segment.page and same_row(rows[-1][0], segment):
            rows[-1].append(segment)
        else:
            rows.append([segment])
    for row in rows:
        row.sort(key=lambda segment: segment.box[0])
    return rows


def _label_rows(rows: list[list[Segment]], hits: list[Hit]) -> tuple[set[int], set[int]]:
    by_segment = {id(hit.segment): hit.label.field for hit in hits}
    stop: set[int] = set()
    skip: set[int] = set()
    for index, row in enumerate(rows):
        fields = {by_segment.get(id(segment)) for segment in row}
        if fields & STOP_FIELDS:
            stop.add(index)
        elif fields & SKIP_FIELDS:
            skip.add(index)
    return stop, skip


def _tokens(row: list[Segment]) -> list[Token]:
    tokens = []
    for segment in row:
        if segment.words:
            tokens += [
                Token(word.text, word.box, segment, position)
                for position, word in enumerate(segment.words)
            ]
        else:
            tokens.append(Token(segment.text, segment.box, segment, -1))
    return tokens


def _header_columns(row: list[Segment]) -> list[Column] | None:
    tokens = _tokens(row)
    if len(tokens) < MIN_COLUMNS:
        return None
    columns: list[Column] = []
    used = 0
    position = 0
    while position < len(tokens):
        matched = _match_column(tokens, position)
        if matched is None:
            position += 1
            continue
        kind, length = matched
        span = tokens[position : position + length]
        columns.append(Column(kind, span[0].box[0], span[-1].box[2]))
        used += length
        position += length
    kinds = {column.kind for column in columns}
    if (
        len(columns) < MIN_COLUMNS
        or "description" not in kinds
        or not kinds & {"amount", "unit_price"}
        or used < MIN_HEADER_SHARE * len(tokens)
    ):
        return None
    return columns


def _match_column(tokens: list[Token], position: int) -> tuple[str, int] | None:
    for length in (4, 3, 2, 1):
        if position + length > len(tokens):
            continue
        text = normalise_label(
            " ".join(token.text for token in tokens[position : position + length])
        )
        for kind, label in COLUMN_LABELS:
            if text == label:
                return kind, length
    return None


def _cells(row: list[Segment], columns: list[Column]) -> dict[str, list[Token]]:
    cells: dict[str, list[Token]] = {}
    for token in _tokens(row):
        cells.setdefault(_column_of(token, columns).kind, []).append(token)
    return cells


def _column_of(token: Token, columns: list[Column]) -> Column:
    nearest = min(columns, key=lambda column: _distance(token.box, column))
    if _distance(token.box, nearest)[0] == 0 or any(char.isdigit() for char in token.text):
        return nearest
    # Words run on to the right of their column's header ("... MicroSDHC Class" under
    # "Title", reaching towards "Qty"); numbers are often set flush right instead.
    started_in = [column for column in columns if column.x0 <= token.box[0]]
    return max(started_in, key=lambda column: column.x0) if started_in else nearest


def _distance(box: Box, column: Column) -> tuple[float, float]:
    overlap = min(box[2], column.x1) - max(box[0], column.x0)
    if overlap > 0:
        return (0.0, -overlap)
    return (max(column.x0 - box[2], box[0] - column.x1), 0.0)


def _item(cells: dict[str, list[Token]]) -> LineItem | None:
    amount = _money_value(cells.get("amount"), last=True)
    unit_price = _money_value(cells.get("unit_price"), last=False)
    if amount is None and unit_price is None:
        return None
    if not cells.get("description") and not cells.get("quantity"):
        return None  # an amount alone on its row: a sum, not an item
    item = LineItem(amount=amount, unit_price=unit_price)
    item.description = _text_value(cells.get("description"))
    quantity = cells.get("quantity")
    if quantity:
        item.quantity, item.unit = _quantity(quantity)
    # A "Tax" column may hold the rate ("14.50%"), the amount, or both in two columns
    # of the same name ("Tax(%)", "Tax").
    taxes = cells.get("tax_rate", []) + cells.get("tax_amount", [])
    rates = [
        token
        for position, token in enumerate(taxes)
        if "%" in token.text
        or (position + 1 < len(taxes) and taxes[position + 1].text.strip() == "%")
    ]
    if rates:
        item.tax_rate = _rate_value(rates)
    others = [token for token in taxes if token not in rates]
    if others and (cells.get("tax_amount") or rates):
        item.tax_amount = _money_value(others, last=True)
    elif others and item.tax_rate is None:
        item.tax_rate = _rate_value(others)
    if cells.get("discount_percent"):
        item.discount_percent = _rate_value(cells["discount_percent"], plain=True)
    return item


def _value(tokens: list[Token], printed: str, value: str, start: int = 0) -> FieldValue:
    segment = tokens[0].segment
    boxes = [token.box for token in tokens]
    box = (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )
    if len(tokens) == 1 and tokens[0].index < 0:
        box = span_box(segment, start, len(printed))
    confidence = sum(token.segment.confidence for token in tokens) / len(tokens)
    return FieldValue(
        printed=printed,
        value=value,
        page=segment.page,
        box=box,
        source_text=" ".join(token.text for token in tokens),
        confidence=round(confidence, 3),
    )


def _money_value(tokens: list[Token] | None, last: bool) -> FieldValue | None:
    if not tokens:
        return None
    text = " ".join(token.text for token in tokens)
    found = find_money(text)
    if not found:
        return None
    money = found[-1] if last else found[0]
    return _value(tokens, money.printed, str(money.amount), money.start)


def _rate_value(tokens: list[Token], plain: bool = False) -> FieldValue | None:
    text = " ".join(token.text for token in tokens)
    found = find_rate(text)
    if found is not None:
        return _value(tokens, found[1], f"{found[0].normalize():f}")
    number = parse_plain_number(text) if plain else None
    return _value(tokens, text, str(number)) if number is not None else None


def _text_value(tokens: list[Token] | None) -> FieldValue | None:
    if not tokens:
        return None
    text = " ".join(token.text for token in tokens)
    return _value(tokens, text, " ".join(text.split()))


_QUANTITY = re.compile(r"^(\d+(?:[.,]\d+)?)\s*([^\W\d_]{1,6})?$")


def _quantity(tokens: list[Token]) -> tuple[FieldValue | None, FieldValue | None]:
    """ "1", "1.00 kg" or, glued by OCR, "15.00g": a number and perhaps its unit."""
    text = " ".join(token.text for token in tokens)
    match = _QUANTITY.match(text.strip())
    if match is None:
        return None, None
    number = parse_plain_number(match.group(1))
    quantity = _value(tokens, match.group(1), str(number), text.find(match.group(1)))
    unit_text = match.group(2)
    unit = None
    if unit_text:
        unit = _value(tokens, unit_text, unit_text, text.rfind(unit_text))
    return quantity, unit


def _continue_description(item: LineItem, tokens: list[Token]) -> None:
    addition = _text_value(tokens)
    if addition is None:
        return
    if item.description is None:
        item.description = addition
        return
    current = item.description
    item.description = current.model_copy(
        update={
            "printed": f"{current.printed}\n{addition.printed}",
            "value": f"{current.value}\n{addition.value}",
            "source_text": f"{current.source_text}\n{addition.source_text}",
            "box": (
                min(current.box[0], addition.box[0]),
                min(current.box[1], addition.box[1]),
                max(current.box[2], addition.box[2]),
                max(current.box[3], addition.box[3]),
            ),
        }
    )


def mentions_inclusion(item: LineItem) -> bool:
    """A row without a unit price whose text says "incl." anywhere: perhaps a part of the
    row above (a levy, a deposit), perhaps an item; the sum check tries both."""
    if item.unit_price is not None or item.description is None:
        return False
    text = " " + normalise_label(item.description.value) + " "
    return any(f" {marker}" in text for marker in ITEM_INCLUDED_MARKERS)


def _mark_included(items: list[LineItem]) -> None:
    for position, item in enumerate(items):
        if position == 0 or item.unit_price is not None or item.description is None:
            continue
        # The marker starts the row's text, or one of its lines or sentences: OCR may
        # read a note printed beside it first ("Serial no: 123. Incl. recycling fee").
        parts = re.split(r"\n|\.\s+", item.description.value)
        item.included_in_previous = any(
            (normalise_label(part) + " ").startswith(ITEM_INCLUDED_MARKERS) for part in parts
        )
