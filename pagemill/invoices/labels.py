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


def _segment_hits(segment: Segment) -> list[Hit]:
    tokens = segment.text.split(" ")
    prefixes = [normalise_label(" ".join(tokens[: count + 1])) for count in range(len(tokens))]
    hits: list[Hit] = []
    longest = 0
    for label in HEADER_LABELS:  # longest first
        if len(label.text) < longest:
            break
        if label.text not in prefixes:
            continue
        count = prefixes.index(label.text) + 1
        printed = " ".join(tokens[:count])
        start = len(printed) + 1 if count < len(tokens) else len(segment.text)
        hits.append(Hit(segment, label, printed, segment.text[start:], start))
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
