"""The stored page image is exactly the pixels PyMuPDF drew, as each reader of it decodes
them: Pillow (the blank and orientation checks, the vLLM engine) and OpenCV (rapidocr,
which takes BGR). A fast encoder that swapped channels or dropped a level would pass a
glance at the page and fail here."""

from __future__ import annotations

import io
from pathlib import Path

import cv2
import numpy as np
import pymupdf
import pytest
from PIL import Image

from pagemill.domain import SourceKind
from worker.engines.rapidocr import read_page
from worker.engines.vllm.grounding import png_size
from worker.engines.vllm.inputs import prepare_image
from worker.engines.vllm.profiles import ImageSpec
from worker.imaging import decode_gray
from worker.render import PageOutputs, render_pages, render_pdf_page_png

DPI = 150
OCR_PAGE = PageOutputs(image=True, pdf_page=False)


def _pdf(path: Path, colour: tuple[float, float, float] | None) -> Path:
    document = pymupdf.open()
    page = document.new_page(width=595, height=842)
    page.insert_text((72, 90), "Invoice 2026-0042", fontsize=20)
    for line in range(30):
        page.insert_text(
            (72, 130 + 14 * line), f"Line {line}: 12 pallets, 1,234.50 EUR", fontsize=9
        )
    # Anti-aliased edges and a grey fill: levels between black and white must survive too.
    page.draw_rect(pymupdf.Rect(72, 580, 300, 640), color=(0.4, 0.4, 0.4), fill=(0.8, 0.8, 0.8))
    if colour is not None:
        page.draw_circle((420, 610), 40, color=colour, fill=colour)
    document.save(path)
    document.close()
    return path


def _drawn(path: Path) -> np.ndarray:
    """The page as PyMuPDF draws it at DPI, RGB."""
    with pymupdf.open(path) as document:
        pixmap = document[0].get_pixmap(dpi=DPI, alpha=False)
        return np.frombuffer(pixmap.samples, np.uint8).reshape(pixmap.h, pixmap.w, 3).copy()


def _stored(path: Path) -> bytes:
    [page] = render_pages(path, SourceKind.pdf, [1], DPI, 40_000_000, lambda _: OCR_PAGE)
    assert page.image_png is not None
    return page.image_png


@pytest.mark.parametrize(
    ("colour", "mode"), [(None, "L"), ((0.85, 0.2, 0.1), "RGB")], ids=["grey", "colour"]
)
def test_the_stored_page_image_decodes_to_the_pixels_drawn(
    tmp_path: Path, colour: tuple[float, float, float] | None, mode: str
) -> None:
    path = _pdf(tmp_path / "page.pdf", colour)
    drawn = _drawn(path)
    png = _stored(path)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert png_size(png) == (drawn.shape[1], drawn.shape[0])

    with Image.open(io.BytesIO(png)) as image:
        assert image.mode == mode
        pillow = np.asarray(image.convert("RGB"))
    assert np.array_equal(pillow, drawn)

    # rapidocr's decoding: OpenCV, three channels in BGR order.
    opencv = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR)
    assert np.array_equal(opencv, drawn[..., ::-1])

    # The blank and orientation checks' grey levels, and what the vLLM engine is given.
    assert np.array_equal(decode_gray(png), np.asarray(Image.fromarray(drawn).convert("L")))
    assert np.array_equal(np.asarray(prepare_image(png, ImageSpec())), drawn)

    # A page drawn later from its one-page PDF is the same bytes prepare stores.
    with pymupdf.open(path) as document:
        assert render_pdf_page_png(document.tobytes(), DPI) == png


def test_rapidocr_reads_the_stored_page_image(tmp_path: Path) -> None:
    path = _pdf(tmp_path / "page.pdf", (0.85, 0.2, 0.1))
    drawn = _drawn(path)
    lines, size = read_page(_stored(path))
    assert size == drawn.shape[:2]
    assert any("Invoice 2026-0042" in line.text for line in lines)


def _noise(shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(7).integers(0, 256, size=shape, dtype=np.uint8)


@pytest.mark.parametrize(
    ("pixels", "stored_mode"),
    [
        (_noise((300, 200)), "L"),
        (_noise((300, 200, 3)), "RGB"),
        # An RGB scan without colour is stored as one channel like a rendered page.
        (np.repeat(_noise((300, 200))[..., None], 3, axis=2), "L"),
    ],
    ids=["grey", "colour", "colourless-rgb"],
)
def test_an_uploaded_image_keeps_its_pixels(
    tmp_path: Path, pixels: np.ndarray, stored_mode: str
) -> None:
    path = tmp_path / "scan.tiff"
    Image.fromarray(pixels).save(path, dpi=(200, 200))
    [page] = render_pages(path, SourceKind.tiff, [1], DPI, 40_000_000)
    assert page.image_png is not None
    rgb = pixels if pixels.ndim == 3 else np.repeat(pixels[..., None], 3, axis=2)
    with Image.open(io.BytesIO(page.image_png)) as image:
        assert image.mode == stored_mode
        assert np.array_equal(np.asarray(image.convert("RGB")), rgb)
    opencv = cv2.imdecode(np.frombuffer(page.image_png, np.uint8), cv2.IMREAD_COLOR)
    assert np.array_equal(opencv, rgb[..., ::-1])
