"""Text lines as the recogniser gives them, and rows made of them.

Boxes are in image pixels, y growing downwards. `level` takes the tilt of a skewed
scan or a photo out of the lines, so that `rows_of` can pair the lines of one row.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# Below this tilt (a pixel in 200) rows pair up as they stand.
_LEVEL_SLOPE = 0.005
# The long lines of a scan turned on the glass scatter in slope by up to 0.007 from top
# to bottom (fitted, on 6 skewed invoices); a tilt changing more than this is a photo's.
_TILT_CHANGE = 0.01
# Slopes are compared between lines at least this many line heights apart.
_TILT_MIN_DY_H = 4.0


@dataclass(frozen=True)
class Box:
    x0: float
    y0: float
    x1: float
    y1: float

    @property
    def height(self) -> float:
        return self.y1 - self.y0

    @property
    def width(self) -> float:
        return self.x1 - self.x0

    @property
    def cy(self) -> float:
        return (self.y0 + self.y1) / 2

    @property
    def cx(self) -> float:
        return (self.x0 + self.x1) / 2


@dataclass(frozen=True)
class Word:
    text: str
    box: Box
    confidence: float | None = None  # the recogniser's score, 0..1


@dataclass(frozen=True)
class Line:
    """One recognised text line; `words` as the recogniser split it (may be one word)."""

    text: str
    box: Box
    words: tuple[Word, ...]
    # Rise of the line's top edge per pixel across (image y grows downwards): a
    # skewed scan or a photo taken at an angle tilts every line.
    slope: float = 0.0
    confidence: float | None = None  # the recogniser's score for the line, 0..1


@dataclass(frozen=True)
class Table:
    rows: tuple[tuple[str, ...], ...]
    box: Box


Block = Line | Table


def union(boxes: Sequence[Box]) -> Box:
    return Box(
        min(b.x0 for b in boxes),
        min(b.y0 for b in boxes),
        max(b.x1 for b in boxes),
        max(b.y1 for b in boxes),
    )


def level(lines: Sequence[Line]) -> list[Line]:
    """The lines turned by the page's tilt, so rows are level: on a photo the amounts at
    the right edge of a receipt stand half a line higher than their labels."""
    tilt = _tilt(lines)
    if tilt is None:
        return list(lines)

    def turn(box: Box, own_slope: float, slope: float) -> Box:
        # Shearing by the slope is the rotation to first order (slopes stay under 0.1);
        # the box of a tilted line is taller than its text by its width times its tilt.
        shrink = min(box.width * abs(own_slope), box.height / 2) / 2
        shift = slope * box.cx
        return Box(box.x0, box.y0 - shift + shrink, box.x1, box.y1 - shift - shrink)

    levelled = []
    for line in lines:
        slope = tilt(line.box.cy)
        words = tuple(
            Word(word.text, turn(word.box, line.slope, slope), word.confidence)
            for word in line.words
        )
        box = turn(line.box, line.slope, slope)
        levelled.append(Line(line.text, box, words, line.slope - slope, line.confidence))
    return levelled


def _tilt(lines: Sequence[Line]) -> Callable[[float], float] | None:
    """The page's tilt at each height, or None for a page that stands level.

    A scan turned on the glass tilts every line alike; a photo taken at an angle tilts
    lines at the top unlike those at the bottom (0.022 against 0.009 on a photographed
    invoice: enough to part a header row from its cells). The tilt is fitted as a straight
    line in y through the long lines' own slopes (Theil-Sen: robust to the odd line the
    detector boxed level), kept constant where it changes less down the page than a scan's
    own slopes scatter."""
    heights = [line.box.height for line in lines]
    long_lines = sorted(
        (line.box.cy, line.slope) for line in lines if line.box.width > 4 * line.box.height
    )
    if not long_lines:
        return None
    median_slope = statistics.median(slope for _, slope in long_lines)
    if abs(median_slope) >= _LEVEL_SLOPE:
        # On a tilted page a line boxed exactly level was boxed without its tilt (the
        # detector gives some lines an upright rectangle): its slope says nothing.
        long_lines = [(y, slope) for y, slope in long_lines if slope != 0.0] or long_lines
    min_dy = _TILT_MIN_DY_H * statistics.median(heights)
    pairs = [
        (s1 - s0) / (y1 - y0)
        for (y0, s0), (y1, s1) in itertools.combinations(long_lines, 2)
        if y1 - y0 > min_dy
    ]
    change = statistics.median(pairs) if pairs else 0.0
    top = min(line.box.cy for line in lines)
    bottom = max(line.box.cy for line in lines)
    if abs(change) * (bottom - top) < _TILT_CHANGE:
        if abs(median_slope) < _LEVEL_SLOPE:
            return None
        return lambda _y: median_slope
    offset = statistics.median(slope - change * y for y, slope in long_lines)
    if max(abs(offset + change * top), abs(offset + change * bottom)) < _LEVEL_SLOPE:
        return None
    return lambda y: offset + change * y


def rows_of(blocks: Sequence[Block]) -> list[list[Block]]:
    """Blocks grouped into visual rows, top to bottom, each row left to right.

    A block joins a row when its middle lies within the row's vertical span, trimmed
    by a quarter of its height at either end, so lines of a skewed photo still pair.
    """
    rows: list[list[Block]] = []
    spans: list[tuple[float, float]] = []
    for block in sorted(blocks, key=lambda b: b.box.cy):
        for index in range(len(rows) - 1, max(-1, len(rows) - 3), -1):
            top, bottom = spans[index]
            margin = (bottom - top) / 4
            if top + margin <= block.box.cy <= bottom - margin:
                rows[index].append(block)
                spans[index] = (min(top, block.box.y0), max(bottom, block.box.y1))
                break
        else:
            rows.append([block])
            spans.append((block.box.y0, block.box.y1))
    return [sorted(row, key=lambda b: b.box.x0) for row in rows]
