"""Text lines as the recogniser gives them, and rows made of them.

Boxes are in image pixels, y growing downwards. `level` takes the tilt of a skewed
scan or a photo out of the lines, so that `rows_of` can pair the lines of one row.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# Below this tilt (a pixel in 200) rows pair up as they stand.
_LEVEL_SLOPE = 0.005


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
    long_lines = [line.slope for line in lines if line.box.width > 4 * line.box.height]
    if not long_lines:
        return list(lines)
    slope = statistics.median(long_lines)
    if abs(slope) < _LEVEL_SLOPE:
        return list(lines)

    def turn(box: Box, own_slope: float) -> Box:
        # Shearing by the slope is the rotation to first order (slopes stay under 0.1);
        # the box of a tilted line is taller than its text by its width times its tilt.
        shrink = min(box.width * abs(own_slope), box.height / 2) / 2
        shift = slope * box.cx
        return Box(box.x0, box.y0 - shift + shrink, box.x1, box.y1 - shift - shrink)

    return [
        Line(
            line.text,
            turn(line.box, line.slope),
            tuple(Word(word.text, turn(word.box, line.slope)) for word in line.words),
            line.slope - slope,
        )
        for line in lines
    ]


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
