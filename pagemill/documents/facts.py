"""What a PDF page's text layer and images say about it: measured by prepare for
every page it renders (worker.render) and by inspection at submit for the quote.

Reads untrusted bytes: call it in a sandboxed child.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pymupdf
from PIL import Image

REPLACEMENT_CHAR = "\ufffd"


@dataclass(frozen=True)
class TextLayerFacts:
    """The facts the routing rule reads (pagemill.routing)."""

    text_chars: int  # characters in the text layer, visible and invisible
    unreadable_chars: int  # U+FFFD and other glyphs the text layer could not map
    invisible_text_chars: int  # render mode 3 text: an OCR layer laid over a scan
    image_coverage: float  # share of the page area covered by raster images, 0..1
    # Nothing at all is drawn (no text, image or path): a blank page, which no engine reads.
    draws_nothing: bool = False
    # Lines of text (text_line_count); None where not counted. Only the quote reads it.
    text_lines: int | None = None


@dataclass(frozen=True)
class TextTrace:
    visible_chars: int
    invisible_chars: int
    unreadable_chars: int
    # Visible characters by writing direction, as clockwise quarter turns in degrees.
    visible_by_direction: Counter[int] = field(default_factory=Counter)


def trace_text(page: pymupdf.Page) -> TextTrace:
    visible = invisible = unreadable = 0
    visible_by_direction: Counter[int] = Counter()
    for span in page.get_texttrace():
        characters = span["chars"]
        count = sum(1 for char in characters if not chr(char[0]).isspace())
        unreadable += sum(1 for char in characters if chr(char[0]) == REPLACEMENT_CHAR)
        # Render mode 3 draws nothing: the text a scanner's OCR lays over its image.
        if span["type"] == 3:
            invisible += count
        else:
            visible += count
            visible_by_direction[_quarter_turn(span["dir"])] += count
    return TextTrace(visible, invisible, unreadable, visible_by_direction)


def _quarter_turn(direction: Sequence[float]) -> int:
    """A span's writing direction as the nearest quarter turn, clockwise degrees on the
    unrotated page (PDF space with y down: (1, 0) is 0, (0, -1), text running up, 270)."""
    degrees = math.degrees(math.atan2(direction[1], direction[0]))
    return round(degrees / 90) % 4 * 90


def image_coverage(page: pymupdf.Page) -> float:
    page_rect = page.rect
    page_area = page_rect.width * page_rect.height
    if page_area <= 0:
        return 0.0
    # Overlapping images are rare on real pages; the sum is capped rather than unioned.
    covered = 0.0
    for info in page.get_image_info():
        box = pymupdf.Rect(info["bbox"]) & page_rect
        if not box.is_empty:
            covered += box.width * box.height
    return min(1.0, covered / page_area)


def text_layer_facts(page: pymupdf.Page) -> TextLayerFacts:
    trace = trace_text(page)
    text_chars = trace.visible_chars + trace.invisible_chars
    coverage = image_coverage(page)
    return TextLayerFacts(
        text_chars=text_chars,
        unreadable_chars=trace.unreadable_chars,
        invisible_text_chars=trace.invisible_chars,
        image_coverage=coverage,
        # The bounding boxes of everything drawn: asked only of a page with no text and no
        # image, where it is a short list.
        draws_nothing=text_chars == 0 and coverage == 0 and not page.get_bboxlog(),
        text_lines=text_line_count(page) if text_chars else 0,
    )


def text_line_count(page: pymupdf.Page) -> int:
    """Lines of text in the text layer, as MuPDF groups its words into lines.

    What the text layer engine's cost runs with (pagemill.accounting.quote): its layout
    analysis works line by line, so a form of many short lines costs more than a page of
    prose with more characters. Inspection at submit and prepare both count with it.
    A few milliseconds on a typical page; images are not decoded for it."""
    return len({(word[5], word[6]) for word in page.get_text("words")})


# How much a page holds, as OCR will find it: how much of a small greyscale rendering is
# ink, as its mean darkness (0 white, 1 black). OCR's cost runs with the text on a page (a
# one-sentence scan reads several times faster than a dense invoice). At this size thin
# strokes blur into grey, so a dark-pixel count would miss them; the mean keeps every
# stroke's share. A letter page is about 300 x 400 pixels, drawn in milliseconds.
# Inspection at submit and prepare both measure it with these functions, so the quote
# can fit cost against it (pagemill.accounting.quote).
INK_DPI = 36
# The longer side at most this: a letter page at INK_DPI; larger pages and image
# uploads are scaled to fit, so every page is measured at about the same size.
INK_MAX_SIDE_PX = 400


def ink_fraction(page: pymupdf.Page) -> float:
    """The page's mean darkness drawn at INK_DPI or less, 0..1."""
    side_in = max(page.rect.width, page.rect.height) / 72
    dpi = max(1, min(INK_DPI, int(INK_MAX_SIDE_PX / side_in))) if side_in > 0 else INK_DPI
    pixmap = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY, alpha=False)
    return _darkness(pixmap.samples)


def image_ink_fraction(image: Image.Image) -> float:
    """The same measure for one frame of an uploaded image."""
    small = image.convert("L")
    small.thumbnail((INK_MAX_SIDE_PX, INK_MAX_SIDE_PX))
    return _darkness(small.tobytes())


def _darkness(grey: bytes) -> float:
    if not grey:
        return 0.0
    return round(1 - float(np.mean(np.frombuffer(grey, dtype=np.uint8))) / 255, 6)
