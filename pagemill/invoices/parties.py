"""Seller and buyer: names and addresses under their labels, tax ids beside theirs."""

from __future__ import annotations

import re

from pagemill.invoices.fields import span_box
from pagemill.invoices.labels import Hit, right_of
from pagemill.invoices.layout import Segment
from pagemill.invoices.lexicon import BUYER_MARKERS, normalise_label
from pagemill.invoices.schemas import FieldValue, Party

# An address block: lines under the label, left-aligned with it, each within this
# many line heights of the one before.
ADDRESS_LINE_GAP_HEIGHTS = 1.8
MAX_ADDRESS_LINES = 6
# EU VAT numbers (two letters, 8-12 characters), India's GSTIN, or a run of digits.
_TAX_ID = re.compile(
    r"(?<!\w)([A-Z]{2}[0-9A-Z]{8,13}|\d{2}[A-Z]{5}\d{4}[A-Z][0-9A-Z]{3}|\d{8,15})(?!\w)"
)
PARTY_WEIGHT = 0.8  # names and addresses: the block under a label may hold more


def read_parties(hits: list[Hit], segments: list[Segment]) -> tuple[Party, Party]:
    seller, buyer = Party(), Party()
    label_segments = {id(hit.segment) for hit in hits}
    for hit in hits:
        field = hit.label.field
        if field == "buyer" and buyer.name is None:
            _fill_party(buyer, hit, segments, label_segments)
        elif field == "seller" and seller.name is None:
            _fill_party(seller, hit, segments, label_segments)
        elif field == "tax_id":
            tax_id = _tax_id(hit, segments, label_segments)
            if tax_id is None:
                continue
            words = set(normalise_label(hit.printed_label).split())
            party = buyer if words & BUYER_MARKERS else seller
            if party.tax_id is None:
                party.tax_id = tax_id
    return seller, buyer


def _fill_party(party: Party, hit: Hit, segments: list[Segment], labels: set[int]) -> None:
    lines = _address_block(hit.segment, segments, labels)
    remainder = hit.remainder.strip(" :")
    if remainder:
        party.name = _value(hit, hit.segment, remainder, hit.remainder_start)
        party.address = _joined(hit, lines)
        return
    right = right_of(hit, segments, labels)
    if right:
        party.name = _value(hit, right[0], right[0].text.strip(" ,"), 0)
        party.address = _joined(hit, lines)
        return
    if lines:
        party.name = _value(hit, lines[0], lines[0].text.strip(" ,"), 0)
        party.address = _joined(hit, lines[1:])


def _address_block(anchor: Segment, segments: list[Segment], labels: set[int]) -> list[Segment]:
    block: list[Segment] = []
    bottom = anchor.bottom
    height = max(anchor.height, 4.0)
    candidates = sorted(
        (
            segment
            for segment in segments
            if segment.page == anchor.page
            and segment.top > anchor.top + 0.5 * height
            and abs(segment.box[0] - anchor.box[0]) <= height
        ),
        key=lambda segment: segment.top,
    )
    for segment in candidates:
        if segment.top - bottom > ADDRESS_LINE_GAP_HEIGHTS * height or id(segment) in labels:
            break
        block.append(segment)
        bottom = segment.bottom
        if len(block) == MAX_ADDRESS_LINES:
            break
    return block


def _joined(hit: Hit, lines: list[Segment]) -> FieldValue | None:
    if not lines:
        return None
    text = "\n".join(line.text.strip() for line in lines)
    box = (
        min(line.box[0] for line in lines),
        min(line.box[1] for line in lines),
        max(line.box[2] for line in lines),
        max(line.box[3] for line in lines),
    )
    confidence = min(line.confidence for line in lines) * hit.label.weight * PARTY_WEIGHT
    return FieldValue(
        printed=text,
        value=", ".join(line.text.strip(" ,") for line in lines),
        page=lines[0].page,
        box=box,
        source_text=text,
        label=hit.printed_label,
        confidence=round(confidence, 3),
    )


def _value(hit: Hit, segment: Segment, text: str, start: int) -> FieldValue:
    offset = segment.text.find(text, start)
    return FieldValue(
        printed=text,
        value=" ".join(text.split()),
        page=segment.page,
        box=span_box(segment, offset, len(text)),
        source_text=segment.text,
        label=hit.printed_label,
        confidence=round(hit.label.weight * PARTY_WEIGHT * segment.confidence, 3),
    )


def _tax_id(hit: Hit, segments: list[Segment], labels: set[int]) -> FieldValue | None:
    places = [(hit.segment, hit.remainder)] + [
        (segment, segment.text) for segment in right_of(hit, segments, labels)[:1]
    ]
    for segment, text in places:
        match = _TAX_ID.search(text.replace(" ", "") if len(text) < 24 else text)
        if match is None:
            continue
        token = match.group(1)
        return FieldValue(
            printed=token,
            value=token,
            page=segment.page,
            box=span_box(segment, segment.text.find(token), len(token)),
            source_text=segment.text,
            label=hit.printed_label,
            confidence=round(hit.label.weight * segment.confidence, 3),
        )
    return None
