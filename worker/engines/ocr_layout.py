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
from dataclasses import dataclass

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
# A table row has three or more cells; a table, two or more such rows whose cells
# are short (text columns have long lines, table cells a few words).
_TABLE_MIN_CELLS = 3
_TABLE_MIN_ROWS = 2
_TABLE_MAX_MEDIAN_WORDS = 4
# Rows with fewer cells (section labels, wrapped descriptions, subtotals) stay in
# a table when a full row follows within this many rows and this gap.
_TABLE_BRIDGE_ROWS = 2
_TABLE_BRIDGE_GAP_H = 1.0
# Word boxes come from the recogniser's character positions and are loose: cells
# merged into one line ("0.00 15.00%") are 0.2 h apart at the least.
_TABLE_GUTTER_H = 0.15
# A headless column filled in at most this share of the full rows is not a column.
_SPARSE_COLUMN = 0.4
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


@dataclass(frozen=True)
class Line:
    """One recognised text line; `words` as the recogniser split it (may be one word)."""

    text: str
    box: Box
    words: tuple[Word, ...]
    # Rise of the line's top edge per pixel across (image y grows downwards): a
    # skewed scan or a photo taken at an angle tilts every line.
    slope: float = 0.0


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


# --- rows ----------------------------------------------------------------------------------


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


# --- tables --------------------------------------------------------------------------------


def find_tables(lines: Sequence[Line], h: float) -> tuple[list[Table], list[Line]]:
    """Tables found among the lines, and the lines left over."""
    rows = rows_of(lines)
    line_rows: list[list[Line]] = [[b for b in row if isinstance(b, Line)] for row in rows]
    tables: list[Table] = []
    used: set[int] = set()
    for start, stop in _table_runs(line_rows, h):
        table = _table_from_rows(line_rows[start:stop], h)
        if table is not None:
            tables.append(table)
            used.update(range(start, stop))
    rest = [line for index, row in enumerate(line_rows) if index not in used for line in row]
    return tables, rest


def _is_table_row(row: Sequence[Line]) -> bool:
    return len(row) >= _TABLE_MIN_CELLS


def _table_runs(rows: Sequence[Sequence[Line]], h: float) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    index = 0
    while index < len(rows):
        if not _is_table_row(rows[index]):
            index += 1
            continue
        start = stop = index
        full_rows = 1
        probe = index + 1
        while probe < len(rows) and probe - stop <= _TABLE_BRIDGE_ROWS + 1:
            gap = rows[probe][0].box.y0 - max(line.box.y1 for line in rows[probe - 1])
            if gap > _TABLE_BRIDGE_GAP_H * h:
                break
            if _is_table_row(rows[probe]):
                stop = probe
                full_rows += 1
            probe += 1
        if full_rows >= _TABLE_MIN_ROWS:
            runs.append((start, stop + 1))
        index = stop + 1
    return runs


def _table_from_rows(rows: Sequence[Sequence[Line]], h: float) -> Table | None:
    cells_words = [len(line.text.split()) for row in rows if _is_table_row(row) for line in row]
    if statistics.median(cells_words) > _TABLE_MAX_MEDIAN_WORDS:
        return None
    # Full rows define the columns; the rows bridged between them (section labels,
    # subtotals, wrapped descriptions) are placed in those columns.
    full_rows = [row for row in rows if _is_table_row(row)]
    if _is_label_and_value_rows(full_rows):
        return None
    words = [word for row in full_rows for line in row for word in line.words]
    columns = _table_columns(words, len(full_rows), h)
    if len(columns) < _TABLE_MIN_CELLS:
        return None
    table_rows = []
    for row in rows:
        cells: list[list[str]] = [[] for _ in columns]
        for line in row:
            column: int | None = None
            for word in line.words:
                # A word in a gutter belongs with the word before it on its line: a
                # wrapped description running past its column stays in its cell.
                inside = _column_containing(word.box, columns)
                if inside is not None:
                    column = inside
                elif column is None:
                    column = _nearest_column(word.box, columns)
                cells[column].append(word.text)
        table_rows.append(tuple(" ".join(cell) for cell in cells))
    table_rows = _without_sparse_columns(table_rows, [_is_table_row(row) for row in rows])
    if len(table_rows[0]) < _TABLE_MIN_CELLS:
        return None
    box = union([line.box for row in rows for line in row])
    return Table(tuple(table_rows), box)


def _without_sparse_columns(
    rows: list[tuple[str, ...]], full: Sequence[bool]
) -> list[tuple[str, ...]]:
    """A column with no header and text in few full rows is the tail of the column to its
    left (long descriptions the recogniser cut in two), joined back to it."""
    full_rows = [row for row, is_full in zip(rows, full, strict=True) if is_full]
    keep = [
        index == 0
        or bool(rows[0][index])
        or sum(1 for row in full_rows if row[index]) > _SPARSE_COLUMN * len(full_rows)
        for index in range(len(rows[0]))
    ]
    merged = []
    for row in rows:
        cells: list[str] = []
        for index, cell in enumerate(row):
            if keep[index]:
                cells.append(cell)
            elif cell:
                cells[-1] = f"{cells[-1]} {cell}".strip()
        merged.append(tuple(cells))
    return merged


def _is_label_and_value_rows(full_rows: Sequence[Sequence[Line]]) -> bool:
    """A row of labels ("Invoice Date:", "Due Date:") over a row of values is a form's
    fields, read as lines, not a table."""
    return len(full_rows) == 2 and all(line.text.rstrip().endswith(":") for line in full_rows[0])


def _table_columns(words: Sequence[Word], n_rows: int, h: float) -> list[tuple[float, float]]:
    """Column spans where words stand; a stray word crossing a gutter in one row of a
    long table (a wrapped description) does not close that gutter."""
    x0 = int(min(w.box.x0 for w in words))
    x1 = int(max(w.box.x1 for w in words)) + 1
    coverage = [0] * (x1 - x0 + 1)
    for word in words:
        for x in range(int(word.box.x0) - x0, int(word.box.x1) - x0 + 1):
            coverage[x] += 1
    stray = 1 if n_rows >= 6 else 0
    min_gutter = max(1, int(_TABLE_GUTTER_H * h))
    columns: list[tuple[float, float]] = []
    start: int | None = None
    empty = 0
    for x, count in enumerate(coverage):
        if count > stray:
            if start is None:
                start = x
            elif empty >= min_gutter:
                columns.append((x0 + start, x0 + x - empty))
                start = x
            empty = 0
        elif start is not None:
            empty += 1
    if start is not None:
        columns.append((x0 + start, x0 + len(coverage) - 1 - empty))
    return columns


def _column_containing(box: Box, columns: Sequence[tuple[float, float]]) -> int | None:
    for index, (left, right) in enumerate(columns):
        if left <= box.cx <= right:
            return index
    return None


def _nearest_column(box: Box, columns: Sequence[tuple[float, float]]) -> int:
    def distance(column: tuple[float, float]) -> float:
        left, right = column
        return max(left - box.cx, 0.0, box.cx - right)

    return min(range(len(columns)), key=lambda index: distance(columns[index]))


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
