"""Blank pages and quarter turns, on synthetic scans and on corpus documents.

The corpus files are copies kept in tests/fixtures/corpus (with their licences), so the
tests run on a clean clone without the shared corpus beside it.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pymupdf
import pytest
from PIL import Image

from worker.imaging import BLANK_MAX_INK_FRACTION, decode_gray, ink_fraction, is_blank, rotate_png

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"
# 100 dpi keeps the tests quick.
RENDER_DPI = 100
# A4 at 150 dpi, the resolution the CPU engine renders at.
A4_150DPI_PX = (1240, 1755)


def render(pdf_name: str, dpi: int = RENDER_DPI) -> bytes:
    with pymupdf.open(CORPUS / pdf_name) as document:
        return bytes(document[0].get_pixmap(dpi=dpi, alpha=False).tobytes("png"))


def to_png(pixels: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def pixels_of(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def as_jpeg_scan(pixels: np.ndarray, quality: int = 30) -> np.ndarray:
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="JPEG", quality=quality)
    return np.asarray(Image.open(io.BytesIO(out.getvalue())))


# --- blank pages --------------------------------------------------------------------------


def noisy_paper(
    seed: int, paper_level: int = 255, size_px: tuple[int, int] = A4_150DPI_PX
) -> np.ndarray:
    """A scanned sheet with nothing on it: sensor noise, salt and pepper, a dark lid edge."""
    rng = np.random.default_rng(seed)
    width, height = size_px
    page = np.full((height, width), float(paper_level))
    page += rng.normal(0.0, 20.0, page.shape)
    specks = rng.random(page.shape)
    page[specks < 0.0025] = 0.0
    page[specks > 0.9975] = 255.0
    page[:, :20] = 30.0  # the scanner lid's shadow along one edge
    return np.clip(page, 0, 255).astype(np.uint8)


@pytest.mark.parametrize("paper_level", [255, 215], ids=["white", "grey recycled paper"])
def test_a_noisy_blank_scan_is_blank(paper_level: int) -> None:
    png = to_png(as_jpeg_scan(noisy_paper(seed=paper_level, paper_level=paper_level)))
    # JPEG smears a few specks into blotches that survive: about 2e-5 here, a fifth of the
    # threshold.
    assert ink_fraction(png) < BLANK_MAX_INK_FRACTION / 2
    assert is_blank(png)


def test_a_page_with_one_line_of_text_is_not_blank() -> None:
    document = pymupdf.open()
    page = document.new_page()  # A4
    page.insert_text((72, 400), "Received with thanks, signed J. Smith", fontsize=11)
    clean = pixels_of(bytes(page.get_pixmap(dpi=150, alpha=False).tobytes("png")))[:, :, 0]
    height, width = clean.shape
    scan = np.minimum(clean, noisy_paper(seed=1, size_px=(width, height)))
    png = to_png(as_jpeg_scan(scan))
    # One line is some 20 times the threshold: a short word would still be well over it.
    assert ink_fraction(png) > 10 * BLANK_MAX_INK_FRACTION
    assert not is_blank(png)


def test_a_corpus_scan_is_not_blank() -> None:
    png = render("ocr_test.pdf")
    assert not is_blank(png)
    # Decoded once, the grey levels answer the same as the PNG they came from.
    assert ink_fraction(decode_gray(png)) == ink_fraction(png)


def test_transparent_areas_count_as_paper() -> None:
    # Fully transparent black pixels: drawn on white, as any viewer shows them.
    transparent = np.zeros((400, 300, 4), dtype=np.uint8)
    assert is_blank(to_png(transparent))
    inked = transparent.copy()
    inked[100:110, 50:250, 3] = 255  # an opaque black bar
    assert not is_blank(to_png(inked))


@pytest.mark.parametrize(("paper", "ink"), [(65535, 0), (52000, 9000)])
def test_sixteen_bit_scans_keep_their_ink(paper: int, ink: int) -> None:
    page = np.full((400, 300), paper, dtype=np.uint16)
    assert is_blank(to_png(page))
    page[100:110, 50:250] = ink
    assert not is_blank(to_png(page))


def test_bytes_that_are_not_an_image_are_refused() -> None:
    with pytest.raises(ValueError, match="not a readable image"):
        ink_fraction(b"%PDF-1.7 not a png")


# --- rotate_png ---------------------------------------------------------------------------


def test_rotate_png_turns_clockwise_and_keeps_the_resolution() -> None:
    pixels = np.full((30, 20, 3), 255, dtype=np.uint8)
    pixels[0, 0] = (255, 0, 0)  # a red top-left corner
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG", dpi=(150, 150))
    png = out.getvalue()

    turned = Image.open(io.BytesIO(rotate_png(png, 90)))
    assert turned.size == (30, 20)
    # Clockwise: the top-left corner moves to the top-right.
    assert turned.convert("RGB").getpixel((29, 0)) == (255, 0, 0)
    assert turned.info["dpi"] == pytest.approx((150, 150), abs=0.1)
    assert np.array_equal(pixels_of(rotate_png(rotate_png(png, 90), 270)), pixels)
    assert rotate_png(png, 0) is png
    assert np.array_equal(pixels_of(rotate_png(png, -90)), pixels_of(rotate_png(png, 270)))


def test_rotate_png_refuses_other_angles() -> None:
    with pytest.raises(ValueError, match="multiple of 90"):
        rotate_png(to_png(np.zeros((2, 2), dtype=np.uint8)), 45)
