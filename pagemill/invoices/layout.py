"""Segments: the blocks layer's lines cut at wide gaps, the unit labels and values are.

An engine may give a label and its value as one line ("Invoice No: 123") or as two
("Invoice No:" ... "123" far to the right); cutting lines where the space between two
words is wider than the line is tall makes both read the same.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from pagemill.documents.blocks import BlockKind, Box, Line, PageBlocks, Word

# A gap between words wider than this many line heights separates two segments.
SEGMENT_GAP_HEIGHTS = 1.5
# Tilt is measured on at least this many lines, and below this slope (a point over a
# 600-point line) is left alone.
MIN_SLOPE_LINES = 3
MIN_SLOPE = 0.002
# With this many measured lines the tilt is fitted against the height on the page.
MIN_FIT_LINES = 6


@dataclass
class Segment:
    text: str
    box: Box
    page: int
    words: list[Word] = field(default_factory=list)
    confidence: float = 1.0  # the engine's mean word confidence; 1.0 when it gives none
    in_table: bool = False  # inside a line-item table found by items.py
    # How far the page's tilt lifts or drops this segment against the page's left edge:
    # geometry below (rows, "under", gaps) uses the levelled top, bottom and middle.
    level: float = 0.0

    @property
    def height(self) -> float:
        # A tilted line's box is taller than its text; its words' boxes are not.
        if self.words:
            return statistics.median(word.box[3] - word.box[1] for word in self.words)
        return self.box[3] - self.box[1]

    @property
    def centre_y(self) -> float:
        return (self.box[1] + self.box[3]) / 2 - self.level

    @property
    def top(self) -> float:
        return self.centre_y - self.height / 2

    @property
    def bottom(self) -> float:
        return self.centre_y + self.height / 2


def page_segments(page: PageBlocks) -> list[Segment]:
    segments: list[Segment] = []
    table_has_lines = False
    for block in page.blocks:
        # A table's cells follow it as blocks of their own. Its own lines, where it has
        # them, are read instead: a table finder may cut a line between two cells
        # ("Invoice Date: August" | "3 , 2014") or leave a row out, and items.py finds
        # columns by itself.
        if block.kind is BlockKind.TABLE:
            table_has_lines = bool(block.lines)
        elif block.kind is BlockKind.TABLE_CELL and table_has_lines:
            continue
        for line in block.lines:
            segments.extend(_cut_line(line, page.page))
    segments = [segment for segment in segments if segment.text.strip()]
    tilt = page_tilt(segments)
    for segment in segments:
        segment.level = tilt(segment.centre_y) * (segment.box[0] + segment.box[2]) / 2
    segments.sort(key=lambda segment: (round(segment.top), segment.box[0]))
    return segments


def page_tilt(segments: list[Segment]) -> Callable[[float], float]:
    """The page's tilt (dy/dx) at a height on the page, from the words along its longer
    lines: a straight line through their slopes against their height.

    A scan fed in askew by two degrees drops a value at the right margin by 15 points
    against its label at the left, more than a line's height; a photo taken at an angle
    tilts its lines more at one end of the page than at the other. Text layers and
    levelled scans give 0."""
    measured = [(segment.centre_y, slope) for segment in segments if (slope := _slope(segment))]
    if len(measured) < MIN_SLOPE_LINES:
        return lambda _y: 0.0
    slopes = [slope for _, slope in measured]
    if abs(statistics.median(slopes)) < MIN_SLOPE and max(map(abs, slopes)) < 2 * MIN_SLOPE:
        return lambda _y: 0.0
    heights = [y for y, _ in measured]
    if len(measured) < MIN_FIT_LINES or statistics.pstdev(heights) == 0:
        median = statistics.median(slopes)
        return lambda _y: median
    fit = statistics.linear_regression(heights, slopes)
    low, high = min(slopes), max(slopes)
    return lambda y: min(high, max(low, fit.intercept + fit.slope * y))


def _slope(segment: Segment) -> float | None:
    words = segment.words
    if len(words) < 3 or segment.box[2] - segment.box[0] < 4 * segment.height:
        return None
    first, last = words[0].box, words[-1].box
    run = (last[0] + last[2]) / 2 - (first[0] + first[2]) / 2
    if run <= 0:
        return None
    return ((last[1] + last[3]) - (first[1] + first[3])) / 2 / run


def _cut_line(line: Line, page: int) -> list[Segment]:
    words = [word for word in line.words if word.text.strip()]
    if not words:
        return [Segment(line.text.strip(), line.box, page, [], _confidence(line.confidence))]
    words.sort(key=lambda word: word.box[0])
    height = max(line.box[3] - line.box[1], 1.0)
    groups: list[list[Word]] = [[words[0]]]
    for word in words[1:]:
        gap = word.box[0] - groups[-1][-1].box[2]
        if gap > SEGMENT_GAP_HEIGHTS * height:
            groups.append([word])
        else:
            groups[-1].append(word)
    return [_segment_of(group, page) for group in groups]


def _segment_of(words: list[Word], page: int) -> Segment:
    box = (
        min(word.box[0] for word in words),
        min(word.box[1] for word in words),
        max(word.box[2] for word in words),
        max(word.box[3] for word in words),
    )
    known = [word.confidence for word in words if word.confidence is not None]
    confidence = sum(known) / len(known) if known else 1.0
    return Segment(" ".join(word.text for word in words), box, page, words, confidence)


def _confidence(value: float | None) -> float:
    return 1.0 if value is None else value


def same_row(a: Segment, b: Segment) -> bool:
    """Whether b's middle lies within a's height (with a little slack for baselines)."""
    height = max(a.height, 1.0)
    return abs(b.centre_y - a.centre_y) <= 0.5 * height + 0.35 * height


def horizontal_overlap(a: Box, b: Box) -> float:
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
