"""What a PDF page's text layer and images say about it: measured by prepare for
every page it renders (worker.render) and by inspection at submit for the quote.

Reads untrusted bytes: call it in a sandboxed child.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

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
    # Share of the text rows that hold lines side by side (TextLines); None where not
    # measured. Only the quote reads it.
    side_by_side_share: float | None = None
    # Words of the text layer (TextLines) and paths drawn (drawn_paths); None where not
    # measured. Only the quote reads them.
    words: int | None = None
    drawn_paths: int | None = None


@dataclass(frozen=True)
class TextTrace:
    visible_chars: int
    invisible_chars: int
    unreadable_chars: int
    # Visible characters by writing direction, as clockwise quarter turns in degrees.
    visible_by_direction: Counter[int] = field(default_factory=Counter)


@dataclass(frozen=True)
class TextLayer:
    """What one reading of a page's text layer says: its characters (TextTrace) and its
    lines (TextLines)."""

    trace: TextTrace
    lines: TextLines


# How MuPDF reads the text for it: ligatures and whitespace as drawn, and no clip to the
# page, so text drawn past the page's edge still counts as text the layer holds (as in a
# trace of the content stream); lines past the edge are left out of TextLines.
_TEXT_LAYER_FLAGS = pymupdf.TEXT_PRESERVE_LIGATURES | pymupdf.TEXT_PRESERVE_WHITESPACE
# A character drawn by filling or stroking its glyph (MuPDF's FZ_STEXT_FILLED and
# FZ_STEXT_STROKED); neither is render mode 3 (or 7), which draws nothing: the text a
# scanner's OCR lays over its image.
_DRAWN = 16 | 32


def page_drawing(page: pymupdf.Page) -> pymupdf.DisplayList:
    """The page's drawing as MuPDF records it (its display list), made once a page and
    kept with it: each measure and the page image replay it rather than interpret the
    page's content streams again. Drawing the text layer, the ink and the image of a
    page from it gives what drawing the page each time gives, for a third of the CPU
    (0.27 ms rather than 0.90 for the text of a letter page, 0.42 rather than 1.13 for
    its ink, once the recording's 0.65 ms is paid)."""
    drawing = getattr(page, "_pagemill_drawing", None)
    if drawing is None:
        drawing = page.get_displaylist()
        page._pagemill_drawing = drawing  # type: ignore[attr-defined]
    return drawing


def page_pixmap(
    page: pymupdf.Page, dpi: int, colorspace: pymupdf.Colorspace = pymupdf.csRGB
) -> pymupdf.Pixmap:
    """page.get_pixmap(dpi=dpi, colorspace=colorspace, alpha=False), from page_drawing."""
    zoom = dpi / 72
    return page_drawing(page).get_pixmap(
        matrix=pymupdf.Matrix(zoom, zoom), colorspace=colorspace, alpha=False
    )


def _text_page(page: pymupdf.Page, flags: int) -> pymupdf.TextPage:
    # Text is read from the page unturned (page.get_textpage takes its /Rotate off while
    # it reads); the recorded drawing is of the page as turned, so a turned page is read
    # the slow way.
    if page.rotation:
        return page.get_textpage(flags=flags)
    return pymupdf.TextPage(page_drawing(page).get_textpage(flags=flags))


def read_text_layer(page: pymupdf.Page) -> TextLayer:
    """The page's TextTrace and TextLines from one extraction of its text: reading the
    layer once a page, rather than tracing it for the characters and extracting its
    words for the lines, took 1.6 ms rather than 5.1 a page on 55 pages of the
    development corpus, with the same counts on 54 of them."""
    visible = invisible = unreadable = words = 0
    visible_by_direction: Counter[int] = Counter()
    extents: list[tuple[float, float]] = []
    page_box = tuple(page.rect)
    text_page = _text_page(page, _TEXT_LAYER_FLAGS)
    for block in text_page.extractDICT()["blocks"]:
        for line in block.get("lines", ()):
            turn = _quarter_turn(line["dir"])
            readable_in_line = 0
            for span in line["spans"]:
                text = span["text"]
                count = len(text) - sum(map(str.isspace, text))
                words += len(text.split())
                replaced = text.count(REPLACEMENT_CHAR)
                unreadable += replaced
                readable_in_line += count - replaced
                if span["char_flags"] & _DRAWN:
                    visible += count
                    visible_by_direction[turn] += count
                else:
                    invisible += count
            # A line of nothing but unmapped glyphs (a bullet a font left unmapped) is not
            # a line of words: it stands beside one.
            box = line["bbox"]
            if readable_in_line and _overlaps(box, page_box):
                extents.append((box[1], box[3]))
    rows = _rows_of(extents)
    shared = sum(1 for lines_in_row in rows if lines_in_row > 1)
    return TextLayer(
        TextTrace(visible, invisible, unreadable, visible_by_direction),
        TextLines(len(extents), shared / len(rows) if rows else 0.0, words),
    )


def _overlaps(box: Sequence[float], page_box: Sequence[float]) -> bool:
    """Whether a box shares some area with the page's: pymupdf.Rect.intersects as plain
    comparisons: building a Rect for each line cost 0.2 ms of the 1.6 a page took to read
    the layer (40 PDF pages of the development corpus, the same counts on all)."""
    x0, y0, x1, y1 = box
    left, top, right, bottom = page_box
    return (
        x0 < x1
        and y0 < y1
        and left < right
        and top < bottom
        and x0 < right
        and left < x1
        and y0 < bottom
        and top < y1
    )


def trace_text(page: pymupdf.Page) -> TextTrace:
    return read_text_layer(page).trace


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
    for info in _image_info(page):
        box = pymupdf.Rect(info["bbox"]) & page_rect
        if not box.is_empty:
            covered += box.width * box.height
    return min(1.0, covered / page_area)


def _image_info(page: pymupdf.Page) -> list[dict[str, Any]]:
    """page.get_image_info(), from page_drawing where the page is not turned (its
    drawing is of the page as turned, as _text_page says): the page's own call reads
    its content streams again, 2.2 ms a page of the development corpus against 0.6.

    The recording can lose a sliver: on the 60 unturned PDF pages of the development
    corpus it gave the same boxes but on one page, where it left out one 13 x 1 pt image
    of 166 (coverage 0.43130 rather than 0.43132). Coverage is a share of the page's
    area, read by routing and the quote against thresholds far coarser than that."""
    if page.rotation:
        return list(page.get_image_info())
    images = page_drawing(page).get_textpage(flags=pymupdf.TEXT_PRESERVE_IMAGES)
    return list(pymupdf.TextPage(images).extractIMGINFO())


def text_layer_facts(page: pymupdf.Page, count_paths: bool = True) -> TextLayerFacts:
    """The page's facts; `drawn_paths` left None unless `count_paths`."""
    layer = read_text_layer(page)
    trace, lines = layer.trace, layer.lines
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
        text_lines=lines.count,
        side_by_side_share=lines.side_by_side_share,
        words=lines.words,
        drawn_paths=drawn_paths(page) if count_paths else None,
    )


@dataclass(frozen=True)
class TextLines:
    """What the text layer engine's cost runs with (pagemill.accounting.quote), as
    inspection at submit and prepare both measure it.

    `count`: lines of text, as MuPDF groups its words into lines. The layout analysis
    works line by line, so a form of many short lines costs more than a page of prose
    with more characters.

    `side_by_side_share`: of the page's rows of text (lines at the same height), the
    share holding more than one line side by side: the cells of a table or a form, the
    columns of a layout. The layout analysis reads each table it finds again to recover
    its grid, about a quarter of a plain page's cost each, and tables are where lines
    stand side by side (on the benchmark corpus an invoice with three tables cost twice
    a page of prose of as many lines).

    `words`: the runs of characters between whitespace in the text layer's spans: the
    words get_text("words") lists, counted from the reading that finds the lines rather
    than by a second extraction (on the 36 born-digital pages of the benchmark corpus
    never fewer and at most 4.6 % more, the same on 16: a word drawn in two fonts counts
    twice). Every word is a box the layout analysis places, so its cost runs with them."""

    count: int
    side_by_side_share: float
    words: int = 0


NO_TEXT_LINES = TextLines(0, 0.0)


def text_lines(page: pymupdf.Page) -> TextLines:
    """A millisecond or two on a typical page; images are not decoded for it."""
    return read_text_layer(page).lines


def text_line_count(page: pymupdf.Page) -> int:
    return text_lines(page).count


def _rows_of(extents: Iterable[tuple[float, float]]) -> list[int]:
    """How many lines stand in each row: lines in one row when the next one's middle is
    within half its height of the middle of the row's first line."""
    rows: list[int] = []
    row_middle = -math.inf
    for top, bottom in sorted(extents, key=lambda extent: extent[0] + extent[1]):
        middle = (top + bottom) / 2
        if rows and middle - row_middle <= (bottom - top) / 2:
            rows[-1] += 1
        else:
            rows.append(1)
            row_middle = middle
    return rows


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
    pixmap = page_pixmap(page, dpi, pymupdf.csGRAY)
    return _darkness(pixmap.samples)


def image_ink_fraction(image: Image.Image) -> float:
    """The same measure for one frame of an uploaded image."""
    small = image.convert("L")
    small.thumbnail((INK_MAX_SIDE_PX, INK_MAX_SIDE_PX))
    return _darkness(small.tobytes())


# How many separate marks a page holds, as OCR will find them: the connected blobs of ink
# (8-connected runs of pixels darker than BLOB_INK_LEVEL) on a grey rendering whose
# longer side is at most BLOB_MAX_SIDE_PX. OCR detects and recognises text mark by mark,
# so its time runs with their number where the mean darkness above cannot tell a
# sentence in a heavy font from a page of small print, nor a dark photo from text: on 26
# pages read by rapidocr the root of the count left the worst page 18 % off when fitted
# without it, the darkness 282 %. At this size a glyph of body text is over a dozen
# pixels tall and stays apart from its neighbours; a letter page is drawn and counted in
# about 13 ms. Dots of a pixel or two (noise) and blobs of more than BLOB_MAX_SHARE of
# the page (a frame, a photo, a dark background) are not marks to read.
# At 1000 pixels, neighbouring letters ran together where an upload had been scaled down
# to it: one invoice counted 630 blobs as a 350 dpi PNG and 828 as its PDF page; at 1400,
# 881 and 956 (another: 649 and 709, then 824 and 859). Fitted on all but one of 24 pages
# rapidocr read and tried on that one, the median page was then 9.0 % off rather than
# 11.8 %, 22 rather than 21 of them within 25 %. The count kept with a page's facts
# changed its name with its size (BLOBS_FACT), so pages counted the old way are not
# fitted with the new.
BLOB_MAX_SIDE_PX = 1400
BLOB_INK_LEVEL = 160
BLOB_MIN_PIXELS = 3
BLOB_MAX_SHARE = 0.01

# The keys prepare keeps a page's measures under in pages.facts (worker.render_child),
# which the quote fits its models on (pagemill.accounting.quote).
INK_FACT = "ink_fraction"
BLOBS_FACT = "ink_blobs_1400"
TEXT_LINES_FACT = "text_lines"
SIDE_BY_SIDE_FACT = "side_by_side_share"
WORDS_FACT = "words"
DRAWN_PATHS_FACT = "drawn_paths"

# A page whose content stream is longer than this is not searched for its paths: listing
# them would cost about as much as drawing the page (inspection leaves such a page
# unmeasured altogether: pagemill.documents.inspect FACTS_MAX_CONTENT_BYTES).
DRAWN_PATHS_MAX_CONTENT_BYTES = 1024**2


def drawn_paths(page: pymupdf.Page, content_bytes: int | None = None) -> int | None:
    """How many vector paths (lines, curves, filled shapes: rulings, frames, logos,
    diagrams) the page draws, as MuPDF lists them; None for a page past
    DRAWN_PATHS_MAX_CONTENT_BYTES. The layout analysis goes through every one of them
    (on the benchmark corpus a handbook page of 355 paths and 166 small images cost as
    much as an invoice with three tables), and its drawn tables are made of them. Under a
    millisecond on a typical page: a median of 0.7 ms on the corpus's 39 PDF pages, 8.9
    on that handbook page.

    `content_bytes`: the length of the page's content streams, when the caller has read
    them already (joining a page's streams is not free: some writers add one for every
    run of text)."""
    if content_bytes is None:
        content_bytes = len(page.read_contents())
    if content_bytes > DRAWN_PATHS_MAX_CONTENT_BYTES:
        return None
    return len(page.get_cdrawings())


def ink_blobs(page: pymupdf.Page) -> int:
    """The page's ink blobs, drawn with its longer side at BLOB_MAX_SIDE_PX or less."""
    side_in = max(page.rect.width, page.rect.height) / 72
    dpi = max(1, int(BLOB_MAX_SIDE_PX / side_in)) if side_in > 0 else INK_DPI
    pixmap = page_pixmap(page, dpi, pymupdf.csGRAY)
    grey = np.frombuffer(pixmap.samples, dtype=np.uint8)
    return _count_blobs(grey.reshape(pixmap.height, pixmap.width))


def image_ink_blobs(image: Image.Image) -> int:
    """The same measure for one frame of an uploaded image."""
    small = image.convert("L")
    small.thumbnail((BLOB_MAX_SIDE_PX, BLOB_MAX_SIDE_PX))
    return _count_blobs(np.asarray(small, dtype=np.uint8))


def _count_blobs(grey: np.ndarray) -> int:
    # Imported here: it takes a quarter of a second, and only pages OCR reads are counted.
    # OpenCV comes with rapidocr (opencv-python-headless).
    import cv2

    if grey.size == 0:
        return 0
    ink = np.ascontiguousarray(grey < BLOB_INK_LEVEL, dtype=np.uint8)
    _count, _labels, stats, _centroids = cv2.connectedComponentsWithStats(ink, connectivity=8)
    areas = stats[1:, cv2.CC_STAT_AREA]  # row 0 is the background
    marks = (areas >= BLOB_MIN_PIXELS) & (areas < BLOB_MAX_SHARE * ink.size)
    return int(np.count_nonzero(marks))


def _darkness(grey: bytes) -> float:
    if not grey:
        return 0.0
    return round(1 - float(np.mean(np.frombuffer(grey, dtype=np.uint8))) / 255, 6)
