"""OCR lines to Markdown: regions first, then lines within each region.

The recogniser gives text lines with their boxes and nothing else. This module finds
the page's regions by recursive cuts along empty gaps (columns before bands, so two
columns read one after the other), finds tables as runs of rows split into three or
more aligned cells, and writes each region as paragraphs of lines. Everything is
measured in units of the page's median line height, so the same rules hold at any
resolution and on photos as on scans. The output is plain Markdown: lines,
paragraphs, headings and tables, never HTML.
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections.abc import Sequence

from worker.engines.ocr_boxes import Block, Line, Table, level, rows_of, union
from worker.engines.ocr_tables import find_tables

# Gaps are measured against the median line height h (line boxes include the
# detector's padding, so h is about 1.4x the font's x-height-to-descender span).
# A gutter between text columns is at least 0.4 h (narrow journal gutters at 150 dpi
# are 13 px for 23 px lines); word spaces never show as gaps, as a line box holds a
# whole run of words.
_COLUMN_GAP_H = 0.4
# Lines within a paragraph are 0.1-0.3 h apart; paragraphs at least 0.5 h.
_BAND_GAP_H = 0.5
_PARAGRAPH_GAP_H = 0.6
# Two parts side by side whose lines pair up row by row, one of them narrow, are
# labels and values ("TOTAL  9.00"), read across; not two columns read down.
_NARROW_PART = 0.25
_ROW_PAIRED = 0.5
_FEW_ROWS = 3
# A line ending within this share of the region's width from its right edge was
# wrapped there (ragged-right prose leaves up to a long word's width free).
_WRAP_SLACK = 0.15
# ... and holds a run of words: a column of single items is a list whatever its edge.
_WRAP_MIN_WORDS = 4
# A heading line stands alone and is clearly taller than body text.
_HEADING_HEIGHT = 1.25
_HEADING_MAX_WORDS = 12


def page_markdown(lines: Sequence[Line]) -> str:
    """The page as Markdown, regions in reading order."""
    lines = [line for line in lines if line.text.strip()]
    if not lines:
        return ""
    lines = level(lines)
    h = statistics.median(line.box.height for line in lines)
    tables, rest = find_tables(lines, h)
    blocks: list[Block] = [*rest, *tables]
    parts = [_render_region(region, h) for region in regions(blocks, h)]
    return "\n\n".join(part for part in parts if part).strip()


# --- regions -------------------------------------------------------------------------------


def regions(blocks: Sequence[Block], h: float) -> list[list[Block]]:
    """Recursive cuts: columns first, then bands; bands that share a gutter are read as
    one multi-column band, so paragraph breaks level in both columns do not interleave them."""
    blocks = list(blocks)
    if len(blocks) <= 1:
        return [blocks] if blocks else []
    columns = _column_split(blocks, h)
    if len(columns) > 1:
        return [region for column in columns for region in regions(column, h)]
    bands = _gap_split(blocks, axis="y", min_gap=_BAND_GAP_H * h)
    if len(bands) == 1:
        return [blocks]
    groups = _merge_bands_sharing_gutters(bands, h)
    if len(groups) == 1:
        groups = bands
    return [region for group in groups for region in regions(group, h)]


def _gap_split(blocks: Sequence[Block], axis: str, min_gap: float) -> list[list[Block]]:
    def span(block: Block) -> tuple[float, float]:
        box = block.box
        return (box.x0, box.x1) if axis == "x" else (box.y0, box.y1)

    ordered = sorted(blocks, key=lambda b: span(b)[0])
    parts: list[list[Block]] = [[ordered[0]]]
    reach = span(ordered[0])[1]
    for block in ordered[1:]:
        start, end = span(block)
        if start - reach >= min_gap:
            parts.append([block])
        else:
            parts[-1].append(block)
        reach = max(reach, end)
    return parts


def _column_split(blocks: Sequence[Block], h: float) -> list[list[Block]]:
    parts = _gap_split(blocks, axis="x", min_gap=_COLUMN_GAP_H * h)
    if len(parts) == 1:
        return parts
    # Join back the parts on either side of a gap that separates labels from values.
    merged = [parts[0]]
    for part in parts[1:]:
        if not _side_by_side(merged[-1], part) or _reads_across(merged[-1], part):
            merged[-1] = merged[-1] + part
        else:
            merged.append(part)
    return merged


def _side_by_side(left: Sequence[Block], right: Sequence[Block]) -> bool:
    """Columns stand beside each other over most of their height and hold more than one
    line each; a lone line beside a block (a sender's name by a logo) is read in its row."""
    if min(len(left), len(right)) < 2 and not any(
        isinstance(block, Table) for block in (*left, *right)
    ):
        return False
    a, b = union([x.box for x in left]), union([x.box for x in right])
    overlap = min(a.y1, b.y1) - max(a.y0, b.y0)
    return overlap >= 0.5 * min(a.height, b.height)


def _reads_across(left: Sequence[Block], right: Sequence[Block]) -> bool:
    if any(isinstance(block, Table) for block in (*left, *right)):
        return False
    smaller, larger = (left, right) if len(left) <= len(right) else (right, left)
    paired = sum(1 for block in smaller if any(_same_row(block, other) for other in larger))
    if paired < _ROW_PAIRED * len(smaller):
        return False
    # A few rows paired across (form fields: labels over their values) read as rows.
    if len(larger) <= _FEW_ROWS:
        return True
    width = union([b.box for b in (*left, *right)]).width
    narrow = min(union([b.box for b in left]).width, union([b.box for b in right]).width)
    return narrow < _NARROW_PART * width


def _same_row(a: Block, b: Block) -> bool:
    overlap = min(a.box.y1, b.box.y1) - max(a.box.y0, b.box.y0)
    return overlap >= 0.5 * min(a.box.height, b.box.height)


def _gutters(blocks: Sequence[Block], h: float) -> list[tuple[float, float]]:
    columns = _column_split(blocks, h)
    return [
        (union([b.box for b in left]).x1, union([b.box for b in right]).x0)
        for left, right in itertools.pairwise(columns)
    ]


def _merge_bands_sharing_gutters(bands: list[list[Block]], h: float) -> list[list[Block]]:
    groups = [bands[0]]
    previous = _gutters(bands[0], h)
    for band in bands[1:]:
        gutters = _gutters(band, h)
        shared = any(a0 < b1 and b0 < a1 for a0, a1 in previous for b0, b1 in gutters)
        if shared:
            groups[-1] = groups[-1] + band
        else:
            groups.append(band)
        previous = gutters
    return groups


# --- Markdown ------------------------------------------------------------------------------

# Underscores inside words (FURN_7777) never emphasise; at a word's edge they might.
_INLINE_SPECIAL = re.compile(r"([\\`*<]|(?<!\w)_|_(?!\w))")
_LINE_START_SPECIAL = re.compile(r"^(#|>|=+\s*$|-{3,}\s*$)")


def escape(text: str) -> str:
    text = _INLINE_SPECIAL.sub(lambda match: "\\" + match.group(0), " ".join(text.split()))
    return _LINE_START_SPECIAL.sub(r"\\\1", text)


def _render_region(blocks: Sequence[Block], h: float) -> str:
    paragraphs: list[tuple[list[str], float]] = []  # lines, row height (0 for a table)
    last_bottom: float | None = None
    wrapped = False  # the last row was one run of text reaching the region's right edge
    lines = [block for block in blocks if isinstance(block, Line)]
    right_edge = max((line.box.x1 for line in lines), default=0.0)
    left_edge = min((line.box.x0 for line in lines), default=0.0)
    for row in rows_of(blocks):
        texts = [block for block in row if isinstance(block, Line)]
        for table in (block for block in row if isinstance(block, Table)):
            paragraphs.append(([_table_markdown(table)], 0.0))
            last_bottom = None
        if not texts:
            continue
        top = min(line.box.y0 for line in texts)
        height = statistics.median(line.box.height for line in texts)
        text = escape(" ".join(line.text for line in texts))
        last_height = paragraphs[-1][1] if paragraphs else 0.0
        if (
            last_bottom is None
            or top - last_bottom > _PARAGRAPH_GAP_H * h
            or max(height, last_height) > _HEADING_HEIGHT * min(height, last_height)
        ):
            paragraphs.append(([text], height))
        elif _is_split_word(paragraphs[-1][0][-1], text):
            paragraphs[-1][0][-1] += text
        elif wrapped:
            # Prose the page wrapped: one line of Markdown a paragraph, as a text layer
            # gives it. Rows that end short (a list, a receipt's items) keep their breaks.
            paragraphs[-1][0][-1] += " " + text
        else:
            paragraphs[-1][0].append(text)
        last_bottom = max(line.box.y1 for line in texts)
        wrapped = (
            len(texts) == 1
            and len(texts[0].text.split()) >= _WRAP_MIN_WORDS
            and texts[0].box.x1 >= right_edge - _WRAP_SLACK * (right_edge - left_edge)
        )
    return "\n\n".join(_paragraph_markdown(lines, height, h) for lines, height in paragraphs)


def _paragraph_markdown(lines: Sequence[str], height: float, h: float) -> str:
    if height == 0.0:
        return lines[0]
    words = " ".join(lines).split()
    if (
        height >= _HEADING_HEIGHT * h
        and len(words) <= _HEADING_MAX_WORDS
        and any(ch.isalpha() for ch in "".join(words))
    ):
        return "## " + " ".join(words)
    return "\n".join(lines)


def _is_split_word(previous: str, text: str) -> bool:
    """A line ending in a hyphen after a letter, followed by one starting in lower case."""
    return (
        len(previous) >= 2
        and previous.endswith("-")
        and previous[-2].isalpha()
        and text[:1].islower()
    )


def _table_markdown(table: Table) -> str:
    def row(cells: Sequence[str]) -> str:
        return "| " + " | ".join(escape(cell).replace("|", "\\|") for cell in cells) + " |"

    header, *body = table.rows
    separator = "| " + " | ".join("---" for _ in header) + " |"
    return "\n".join([row(header), separator, *(row(cells) for cells in body)])
