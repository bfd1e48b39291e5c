"""Page images keep every pixel: colourless pages are stored as one channel, any
colour keeps all three."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pymupdf
from PIL import Image

from pagemill.domain import SourceKind
from worker.render import render_pages


def _pdf(path: Path, colour: tuple[float, float, float] | None) -> Path:
    document = pymupdf.open()
    page = document.new_page()
    page.insert_text((72, 72), "Invoice 2026-0042  Total 1,234.50 EUR", fontsize=12)
    page.draw_rect(pymupdf.Rect(72, 100, 300, 140), color=(0.4, 0.4, 0.4), width=1)
    if colour is not None:
        page.draw_rect(pymupdf.Rect(72, 200, 200, 260), color=colour, fill=colour)
    document.save(path)
    return path


def _decoded(png: bytes) -> Image.Image:
    return Image.open(io.BytesIO(png))


def test_a_page_without_colour_is_one_channel_with_the_same_pixels(tmp_path: Path) -> None:
    path = _pdf(tmp_path / "grey.pdf", None)
    [page] = render_pages(path, SourceKind.pdf, [1], dpi=100, max_pixels=10**8)
    image = _decoded(page.image_png)
    assert image.mode == "L"
    reference = pymupdf.open(path)[0].get_pixmap(dpi=100, alpha=False)
    rgb = np.frombuffer(reference.samples, dtype=np.uint8).reshape(reference.h, reference.w, 3)
    assert np.array_equal(np.asarray(image), rgb[..., 0])
    assert np.asarray(image).min() < 128  # the text is there


def test_a_page_with_colour_keeps_three_channels(tmp_path: Path) -> None:
    path = _pdf(tmp_path / "red.pdf", (0.9, 0.1, 0.1))
    [page] = render_pages(path, SourceKind.pdf, [1], dpi=100, max_pixels=10**8)
    image = _decoded(page.image_png)
    assert image.mode == "RGB"
    red = np.asarray(image)[int(230 / 72 * 100), int(130 / 72 * 100)]
    assert red[0] > 200 and red[1] < 60
