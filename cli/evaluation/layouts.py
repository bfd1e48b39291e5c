"""Born-digital pages laid out anew from a document's text: two columns, a narrow receipt.

A scanned variant of such a page tests reading order and narrow layouts on text that
is not tied to any one file: the words are the source's, the layout is generated, and
the new page's own text layer is the exact reference.
"""

from __future__ import annotations

import re

import pymupdf

A4_WIDTH_PT, A4_HEIGHT_PT = 595.0, 842.0
MARGIN_PT = 54.0
# A journal's gutter: 18 pt is 37 px at 150 dpi, wider than a word space (about 8 px
# at 10 pt), narrower than a line's height.
GUTTER_PT = 18.0
BODY_FONT_PT = 10.0
# An 80 mm till roll, and a receipt printer's monospaced type.
RECEIPT_WIDTH_PT = 227.0
RECEIPT_FONT_PT = 9.0
RECEIPT_MAX_HEIGHT_PT = 900.0


def two_column_page(text: str) -> pymupdf.Document:
    """One A4 page, the text's paragraphs flowed down the left column, then the right;
    what does not fit is left out (the page's own text layer is the reference)."""
    document = pymupdf.open()
    page = document.new_page(width=A4_WIDTH_PT, height=A4_HEIGHT_PT)
    column_width = (A4_WIDTH_PT - 2 * MARGIN_PT - GUTTER_PT) / 2
    left = pymupdf.Rect(MARGIN_PT, MARGIN_PT, MARGIN_PT + column_width, A4_HEIGHT_PT - MARGIN_PT)
    right = pymupdf.Rect(left.x1 + GUTTER_PT, left.y0, A4_WIDTH_PT - MARGIN_PT, left.y1)
    remaining = _paragraphs(text)
    for column in (left, right):
        remaining = _fill(page, column, remaining, BODY_FONT_PT, "helv")
    return document


def single_column_page(text: str) -> pymupdf.Document:
    """The same flow as `two_column_page` in one column across the page: a yardstick."""
    document = pymupdf.open()
    page = document.new_page(width=A4_WIDTH_PT, height=A4_HEIGHT_PT)
    body = pymupdf.Rect(MARGIN_PT, MARGIN_PT, A4_WIDTH_PT - MARGIN_PT, A4_HEIGHT_PT - MARGIN_PT)
    _fill(page, body, _paragraphs(text), BODY_FONT_PT, "helv")
    return document


def receipt_page(text: str) -> pymupdf.Document:
    """A narrow page in monospaced type, one source line a line, wrapped to the width."""
    lines = [line for line in (" ".join(raw.split()) for raw in text.splitlines()) if line]
    font = pymupdf.Font("cour")
    width = RECEIPT_WIDTH_PT - 2 * 12.0
    wrapped: list[str] = []
    for line in lines:
        wrapped.extend(_wrap(line, font, RECEIPT_FONT_PT, width))
    leading = RECEIPT_FONT_PT * 1.35
    height = min(RECEIPT_MAX_HEIGHT_PT, 24.0 + leading * len(wrapped))
    document = pymupdf.open()
    page = document.new_page(width=RECEIPT_WIDTH_PT, height=height)
    y = 12.0 + RECEIPT_FONT_PT
    for line in wrapped:
        if y > height - 12.0:
            break
        label, amount = _split_amount(line)
        page.insert_text((12.0, y), label, fontname="cour", fontsize=RECEIPT_FONT_PT)
        if amount:
            # Amounts stand at the right edge, as a till prints them.
            x = RECEIPT_WIDTH_PT - 12.0 - font.text_length(amount, fontsize=RECEIPT_FONT_PT)
            page.insert_text((x, y), amount, fontname="cour", fontsize=RECEIPT_FONT_PT)
        y += leading
    return document


_AMOUNT = re.compile(r"^[$\u20ac\u00a3]?-?\d[\d.,]*%?$")


def _split_amount(line: str) -> tuple[str, str]:
    label, _, last = line.rpartition(" ")
    if label and _AMOUNT.match(last) and any(ch.isalpha() for ch in label):
        return label, last
    return line, ""


def _paragraphs(text: str) -> list[str]:
    paragraphs: list[str] = []
    current: list[str] = []
    for raw in text.splitlines():
        words = raw.split()
        if words:
            current.extend(words)
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    if current:
        paragraphs.append(" ".join(current))
    return paragraphs


def _fill(
    page: pymupdf.Page, column: pymupdf.Rect, paragraphs: list[str], size: float, font: str
) -> list[str]:
    """Writes whole lines of the paragraphs into the column; returns what is left."""
    measure = pymupdf.Font(font)
    leading = size * 1.25
    y = column.y0 + size
    for index, paragraph in enumerate(paragraphs):
        lines = _wrap(paragraph, measure, size, column.width)
        for line_index, line in enumerate(lines):
            if y > column.y1:
                rest = " ".join(lines[line_index:])
                return [rest, *paragraphs[index + 1 :]]
            page.insert_text((column.x0, y), line, fontname=font, fontsize=size)
            y += leading
        y += leading * 0.6
    return []


def _wrap(text: str, font: pymupdf.Font, size: float, width: float) -> list[str]:
    lines: list[str] = []
    current = ""
    for word in text.split():
        candidate = f"{current} {word}" if current else word
        if current and font.text_length(candidate, fontsize=size) > width:
            lines.append(current)
            current = word
        else:
            current = candidate
    if current:
        lines.append(current)
    return lines


# Variant kinds whose page is laid out anew from the source's text before it is imaged.
RELAYOUTS = {"two-column": two_column_page, "receipt": receipt_page}
