"""Split a document into pages: facts, a page image at the engine's resolution and,
for PDFs, the page alone as a one-page PDF. Pure: no Celery, database or S3.

Pages are yielded one at a time so a thousand-page document never sits in memory.
What is made of each page can depend on its facts (`PageOutputs`): a page read from
its text layer needs the one-page PDF and no image, a page read by OCR the opposite,
and the image is most of the cost of a page.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pymupdf
from PIL import Image

from pagemill.documents.facts import (
    TextTrace,
    drawn_paths,
    image_coverage,
    image_ink_blobs,
    image_ink_fraction,
    ink_blobs,
    ink_fraction,
    page_pixmap,
    read_text_layer,
)
from pagemill.domain import SourceKind
from worker.engines.base import PageFacts

# Pillow's default pixel guard; scans beyond it are decompression bombs, not documents.
Image.MAX_IMAGE_PIXELS = 180_000_000
# Resolution assumed for an image that does not state its own.
DEFAULT_IMAGE_DPI = 150
# A text layer tells which way up its page is drawn when it has at least this many visible
# characters, this share of them run one way, and raster images cover at most this share
# of the page: a scan's pixels can lie otherwise than any text laid over them.
TEXT_ORIENTATION_MIN_CHARS = 50
TEXT_ORIENTATION_MIN_SHARE = 0.9
TEXT_ORIENTATION_MAX_IMAGE_COVERAGE = 0.5
# zlib level of page images (see encode_page_png): level 2 or 3 saves 2-4 % of the bytes
# for 10-30 % more encoding time.
PNG_ZLIB_LEVEL = 1


@dataclass(frozen=True)
class PageOutputs:
    """What to make of one PDF page (an uploaded image is always its own page image)."""

    image: bool = True
    pdf_page: bool = True


EVERYTHING = PageOutputs()
# Decides from a page's facts what to make of it; the default makes both.
OutputsFor = Callable[[PageFacts], PageOutputs]


@dataclass(frozen=True)
class RenderedPage:
    facts: PageFacts
    image_png: bytes | None  # None when the page's outputs left the image out
    image_dpi: int  # the resolution the page is (or would be) rendered at
    image_width_px: int | None
    image_height_px: int | None
    pdf_page: bytes | None  # None for images, and for PDF pages that did not ask for it
    render_seconds: float
    # The page's ink as inspection measures it at submit, kept with its facts so the quote
    # can fit OCR cost against it; None for a page read from its text layer (priced by
    # its characters).
    ink_fraction: float | None = None
    # Its text layer's lines, kept for the same reason (the text layer engine is priced
    # by them); None for an image.
    text_lines: int | None = None
    # And the share of its text rows holding lines side by side, for the same reason.
    side_by_side_share: float | None = None
    # The page's ink blobs as inspection counts them (pagemill.documents.facts.ink_blobs),
    # for the same reason as its ink; None for a page read from its text layer.
    ink_blobs: int | None = None
    # Its words and the paths it draws, for the same reason (pagemill.documents.facts.
    # TextLines, drawn_paths); None for an image.
    words: int | None = None
    drawn_paths: int | None = None


def render_pages(
    path: Path,
    kind: SourceKind,
    numbers: Sequence[int],
    dpi: int,
    max_pixels: int,
    outputs_for: OutputsFor = lambda _facts: EVERYTHING,
) -> Iterator[RenderedPage]:
    if kind is SourceKind.pdf:
        yield from _render_pdf_pages(path, numbers, dpi, max_pixels, outputs_for)
    else:
        yield from _render_image_pages(path, numbers, max_pixels)


def _render_pdf_pages(
    path: Path, numbers: Sequence[int], dpi: int, max_pixels: int, outputs_for: OutputsFor
) -> Iterator[RenderedPage]:
    with pymupdf.open(str(path), filetype="pdf") as document:
        for number in numbers:
            started = time.perf_counter()
            page = document.load_page(number - 1)
            # Read once: the facts route the page, the lines price pages like it.
            text_layer = read_text_layer(page)
            facts = pdf_page_facts(page, number, text_layer.trace)
            outputs = outputs_for(facts)
            page_dpi = _dpi_within_budget(page.rect.width, page.rect.height, dpi, max_pixels)
            png, width, height, ink, blobs = None, None, None, None, None
            if outputs.image:
                pixmap = page_pixmap(page, page_dpi)
                png, width, height = encode_png(pixmap), pixmap.width, pixmap.height
                ink, blobs = ink_fraction(page), ink_blobs(page)
            lines = text_layer.lines
            pdf_bytes = None
            if outputs.pdf_page:
                single = pymupdf.open()
                single.insert_pdf(document, from_page=number - 1, to_page=number - 1)
                pdf_bytes = single.tobytes(deflate=True)
                single.close()
            yield RenderedPage(
                facts=facts,
                image_png=png,
                image_dpi=page_dpi,
                image_width_px=width,
                image_height_px=height,
                pdf_page=pdf_bytes,
                render_seconds=time.perf_counter() - started,
                ink_fraction=ink,
                ink_blobs=blobs,
                text_lines=lines.count,
                side_by_side_share=lines.side_by_side_share,
                words=lines.words,
                drawn_paths=drawn_paths(page),
            )


def render_pdf_page_png(pdf_page: bytes, dpi: int) -> bytes:
    """The image of a one-page PDF, as prepare would have made it, for a page prepare
    did not render (one read from its text layer) when a check or repair needs pixels.

    Runs in the calling process: the same exposure as the text layer engine, which
    parses the same one-page PDF there.
    """
    with pymupdf.open(stream=pdf_page, filetype="pdf") as document:
        return encode_png(document.load_page(0).get_pixmap(dpi=dpi, alpha=False))


def encode_png(pixmap: pymupdf.Pixmap) -> bytes:
    """PNG of a rendered page (grey or RGB, no alpha), as `encode_page_png` makes it."""
    if pixmap.n not in (1, 3) or pixmap.alpha:
        return pixmap.tobytes("png")  # nothing renders these; MuPDF's encoder takes them
    samples = np.frombuffer(pixmap.samples_mv, dtype=np.uint8)
    return encode_page_png(samples.reshape(pixmap.height, pixmap.width, pixmap.n))


def encode_page_png(pixels: np.ndarray) -> bytes:
    """Lossless PNG of a page image (height x width, or x 1 or 3 channels in RGB order);
    one grey channel when the page has no colour at all.

    Exactly the same pixels either way (every pixel has R == G == B), but most pages are
    text in black and grey, and for them the single channel halves the encoding time and
    the size in storage.

    OpenCV's libpng at zlib level 1 with no row filter: encoding was most of what
    rendering a page cost, and on a page that is mostly paper the row filters, not the
    deflate, are most of an encoder's time. Against MuPDF's PNG, used before, on 19
    pages of 14 PDFs at 150 dpi: 3.6x faster to encode a grey page and 2.3x a
    colour one, 1.4-2.2x faster to decode (Pillow and OpenCV), 13 % larger. Pillow's PNG
    and lossless WebP were slower to encode and to decode (README, "How work flows").
    """
    # Imported here: OpenCV takes a quarter of a second to import, and a render child that
    # makes no page image (pages read from their text layer) must not pay for it.
    import cv2

    if pixels.ndim == 3 and pixels.shape[2] == 1:
        pixels = pixels[..., 0]
    if pixels.ndim == 3:
        red, green, blue = cv2.split(pixels)
        colourless = (
            cv2.norm(red, green, cv2.NORM_INF) == 0 and cv2.norm(green, blue, cv2.NORM_INF) == 0
        )
        # OpenCV takes three channels in BGR order and writes them to the PNG as RGB.
        pixels = red if colourless else cv2.merge((blue, green, red))
    ok, encoded = cv2.imencode(
        ".png",
        pixels,
        [
            cv2.IMWRITE_PNG_COMPRESSION,
            PNG_ZLIB_LEVEL,
            cv2.IMWRITE_PNG_FILTER,
            cv2.IMWRITE_PNG_FILTER_NONE,
        ],
    )
    if not ok:
        raise ValueError(f"the page image ({pixels.shape}) could not be encoded as PNG")
    return encoded.tobytes()


def pdf_page_facts(page: pymupdf.Page, number: int, trace: TextTrace | None = None) -> PageFacts:
    """The page's facts; `trace` where its text layer was read already."""
    trace = trace if trace is not None else read_text_layer(page).trace
    coverage = image_coverage(page)
    return PageFacts(
        number=number,
        width_pt=float(page.rect.width),
        height_pt=float(page.rect.height),
        text_chars=trace.visible_chars + trace.invisible_chars,
        unreadable_chars=trace.unreadable_chars,
        invisible_text_chars=trace.invisible_chars,
        image_coverage=coverage,
        rotation=int(page.rotation),
        text_upright_turn=_text_upright_turn(
            trace.visible_by_direction, coverage, int(page.rotation)
        ),
        # Decompressing is cheap (milliseconds for 14 MB); counting the drawings would cost
        # as much as drawing them.
        content_bytes=len(page.read_contents()),
    )


def _text_upright_turn(
    chars_by_direction: Counter[int], image_coverage: float, page_rotation: int
) -> int | None:
    total = sum(chars_by_direction.values())
    if total < TEXT_ORIENTATION_MIN_CHARS or image_coverage > TEXT_ORIENTATION_MAX_IMAGE_COVERAGE:
        return None
    direction, count = chars_by_direction.most_common(1)[0]
    if count < TEXT_ORIENTATION_MIN_SHARE * total:
        return None
    # Rendering applies /Rotate clockwise on top of the text's own direction; undoing both
    # sets the text's lines running left to right.
    return -(direction + page_rotation) % 360


def _dpi_within_budget(width_pt: float, height_pt: float, dpi: int, max_pixels: int) -> int:
    pixels = (width_pt / 72 * dpi) * (height_pt / 72 * dpi)
    if pixels <= max_pixels:
        return dpi
    return max(1, math.floor(dpi * math.sqrt(max_pixels / pixels)))


def _render_image_pages(
    path: Path, numbers: Sequence[int], max_pixels: int
) -> Iterator[RenderedPage]:
    with Image.open(path) as image:
        for number in numbers:
            started = time.perf_counter()
            image.seek(number - 1)
            frame = image.convert("L" if image.mode in ("1", "L", "I;16") else "RGB")
            dpi = _image_dpi(image)
            ink, blobs = image_ink_fraction(frame), image_ink_blobs(frame)
            if frame.width * frame.height > max_pixels:
                scale = math.sqrt(max_pixels / (frame.width * frame.height))
                new_size = (max(1, int(frame.width * scale)), max(1, int(frame.height * scale)))
                frame = frame.resize(new_size, Image.Resampling.LANCZOS)
                dpi = max(1, int(dpi * scale))
            png = encode_page_png(np.asarray(frame))
            yield RenderedPage(
                facts=PageFacts.image_only(
                    number, width_pt=frame.width * 72 / dpi, height_pt=frame.height * 72 / dpi
                ),
                image_png=png,
                image_dpi=dpi,
                image_width_px=frame.width,
                image_height_px=frame.height,
                pdf_page=None,
                render_seconds=time.perf_counter() - started,
                ink_fraction=ink,
                ink_blobs=blobs,
            )


def _image_dpi(image: Image.Image) -> int:
    stated = image.info.get("dpi")
    if stated and stated[0] and 50 <= float(stated[0]) <= 1200:
        return round(float(stated[0]))
    return DEFAULT_IMAGE_DPI
