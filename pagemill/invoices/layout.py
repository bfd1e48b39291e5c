"""Segments: the blocks layer's lines cut at wide gaps, the unit labels and values are.

An engine may give a label and its value as one line ("Invoice No: 123") or as two
("Invoice No:" ... "123" far to the right); cutting lines where the space between two
words is wider than the line is tall makes both read the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pagemill.documents.blocks import BlockKind, Box, Line, PageBlocks, Word

# A gap between words wider than this many line heights separates two segments.
SEGMENT_GAP_HEIGHTS = 1.5


@dataclass
class Segment:
    text: str
    box: Box
    page: int
    words: list[Word] = field(default_factory=list)
    confidence: float = 1.0  # the engine's mean word confidence; 1.0 when it gives none
    in_table: bool = False  # inside a line-item table found by items.py

    @property
    def height(self) -> float:
        return self.box[3] - self.box[1]

    @property
    def centre_y(self) -> float:
        return (self.box[1] + self.box[3]) / 2


def page_segments(page: PageBlocks) -> list[Segment]:
    segments: list[Segment] = []
    for block in page.blocks:
        if block.kind is BlockKind.TABLE and _has_cells_after(page, block):
            continue  # its cells follow as blocks of their own
        for line in block.lines:
            segments.extend(_cut_line(line, page.page))
    segments = [segment for segment in segments if segment.text.strip()]
    segments.sort(key=lambda segment: (round(segment.box[1]), segment.box[0]))
    return segments


def _has_cells_after(page: PageBlocks, table: object) -> bool:
    index = page.blocks.index(table)  # type: ignore[arg-type]
    following = page.blocks[index + 1 : index + 2]
    return bool(following) and following[0].kind is BlockKind.TABLE_CELL


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
    slack = 0.35 * max(a.height, 1.0)
    return a.box[1] - slack <= b.centre_y <= a.box[3] + slack


def horizontal_overlap(a: Box, b: Box) -> float:
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
