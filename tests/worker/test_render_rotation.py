"""A PDF page's /Rotate is applied by the renderer: the page image is the page as a viewer
shows it, so orientation detection starts from what a reader would see."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pymupdf
import pytest
from PIL import Image

from pagemill.domain import SourceKind
from worker.render import render_pages

# Where the mark drawn at the top left of the unrotated page shows, per /Rotate (clockwise).
CORNER_SHOWN = {0: "top left", 90: "top right", 180: "bottom right", 270: "bottom left"}


def corner_with_ink(png: bytes) -> str:
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
    height, width = pixels.shape
    corners = {
        "top left": pixels[: height // 4, : width // 4],
        "top right": pixels[: height // 4, -width // 4 :],
        "bottom left": pixels[-height // 4 :, : width // 4],
        "bottom right": pixels[-height // 4 :, -width // 4 :],
    }
    [inked] = [name for name, area in corners.items() if area.min() < 128]
    return inked


@pytest.mark.parametrize("rotate", [0, 90, 180, 270])
def test_pdf_rotate_is_applied_when_rendering(rotate: int, tmp_path: Path) -> None:
    document = pymupdf.open()
    page = document.new_page(width=400, height=600)  # portrait, unrotated
    page.draw_rect(pymupdf.Rect(20, 20, 80, 80), color=(0, 0, 0), fill=(0, 0, 0))
    page.set_rotation(rotate)
    path = tmp_path / f"rotate-{rotate}.pdf"
    document.save(path)

    [rendered] = render_pages(path, SourceKind.pdf, [1], 72, 40_000_000)
    assert rendered.facts.rotation == rotate
    portrait = rotate in (0, 180)
    assert (rendered.image_height_px > rendered.image_width_px) is portrait
    assert corner_with_ink(rendered.image_png) == CORNER_SHOWN[rotate]
