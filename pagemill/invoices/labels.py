"""Finding labels on a page, and the segments where each label's value may sit."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from pagemill.invoices.layout import Segment, horizontal_overlap, same_row
from pagemill.invoices.lexicon import HEADER_LABELS, Label, normalise_label

# How far below its label a value may start, in label heights: a value one or two
# lines under its label ("Due Date:" over "04/04/2023"), not a paragraph away.
BELOW_REACH_HEIGHTS = 2.6


@dataclass(frozen=True)
class Hit:
    segment: Segment
    label: Label
    printed_label: str
    remainder: str  # the segment's text after the label
    remainder_start: int  # where it starts in segment.text


def find_hits(segments: list[Segment]) -> list[Hit]:
    hits: list[Hit] = []
    for segment in segments:
        hits.extend(_segment_hits(segment))
    return hits


CURRENCY_SYMBOLS = "$€£¥₹"


def token_spans(text: str) -> list[tuple[int, int]]:
    """Where the words of a line start and end. OCR may drop the space between a label
    and its value, so a word also ends after a colon, before a currency symbol, and
    where a lower-case letter meets a capital: "Date:31/12/2017", "Subtotal$150.90",
    "InvoiceNo:#", "InvoiceINV/2023/03/0008"."""
    spans: list[tuple[int, int]] = []
    start: int | None = None
    for position, char in enumerate(text):
        if char.isspace():
            if start is not None:
                spans.append((start, position))
                start = None
            continue
        previous = text[position - 1] if position else " "
        boundary = start is not None and (
            previous == ":" or char in CURRENCY_SYMBOLS or (previous.islower() and char.isupper())
        )
        if boundary and start is not None:
            spans.append((start, position))
            start = None
        if start is None:
            start = position
    if start is not None:
        spans.append((start, len(text)))
    return spans


def _segment_hits(segment: Segment) -> list[Hit]:
    text = segment.text
    spans = token_spans(text)
    words = [text[start:end] for start, end in spans]
    # Each prefix read as printed ("MwSt.") and with its words apart ("InvoiceNo:").
    as_printed = [normalise_label(text[:end]) for _, end in spans]
    apart = [normalise_label(" ".join(words[: count + 1])) for count in range(len(words))]
    hits: list[Hit] = []
    longest = 0
    for label in HEADER_LABELS:  # longest first
        if len(label.text) < longest:
            break
        if label.text in as_printed:
            count = as_printed.index(label.text) + 1
        elif label.text in apart:
            count = apart.index(label.text) + 1
        else:
            continue
        printed = text[: spans[count - 1][1]]
        start = spans[count][0] if count < len(spans) else len(text)
        hits.append(Hit(segment, label, printed, text[start:], start))
        longest = len(label.text)
    return hits


def document_language(hits: list[Hit]) -> str | None:
    votes = Counter(hit.label.language for hit in hits if hit.label.weight >= 0.8)
    return votes.most_common(1)[0][0] if votes else None


def right_of(hit: Hit, segments: list[Segment], label_segments: set[int]) -> list[Segment]:
    """Segments on the label's row to its right, up to the next label."""
    anchor = hit.segment
    row = [
        segment
        for segment in segments
        if segment.page == anchor.page
        and segment is not anchor
        and segment.box[0] >= anchor.box[2] - 1
        and same_row(anchor, segment)
    ]
    row.sort(key=lambda segment: segment.box[0])
    found = []
    for segment in row:
        if id(segment) in label_segments:
            break
        found.append(segment)
    return found


def below(hit: Hit, segments: list[Segment], label_segments: set[int]) -> Segment | None:
    """The nearest segment under the label, in its column, if it is no label itself."""
    anchor = hit.segment
    reach = anchor.bottom + BELOW_REACH_HEIGHTS * max(anchor.height, 4.0)
    under = [
        segment
        for segment in segments
        if segment.page == anchor.page
        and segment is not anchor
        and segment.centre_y > anchor.bottom
        and segment.top <= reach
        and horizontal_overlap(segment.box, anchor.box) > 0
    ]
    if not under:
        return None
    nearest = min(under, key=lambda segment: (segment.top, segment.box[0]))
    return None if id(nearest) in label_segments else nearest
