"""A page's measures and image are drawn from its recorded drawing (page_drawing), made
once a page: what they give must be exactly what drawing the page itself gives, or the
quote, fitted on facts prepare measured, and routing would drift."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from pagemill.documents.facts import (
    _TEXT_LAYER_FLAGS,
    _image_info,
    _text_page,
    ink_blobs,
    ink_fraction,
    page_drawing,
    page_pixmap,
    read_text_layer,
)
from tests.conftest import SAMPLES


def turned_pdf(path: Path, rotation: int) -> Path:
    """Text, a ruled box and a raster image on a page with /Rotate set."""
    with pymupdf.open() as document:
        page = document.new_page(width=595, height=842)
        for line in range(20):
            page.insert_text((72, 90 + 14 * line), f"Line {line}: 3 x 12.50 EUR", fontsize=10)
        page.draw_rect(pymupdf.Rect(72, 400, 400, 460), width=0.8)
        page.insert_image(
            pymupdf.Rect(300, 500, 500, 700), filename=str(SAMPLES / "scanned-invoice.png")
        )
        page.set_rotation(rotation)
        document.save(str(path))
    return path


def pages(paths: list[Path]) -> list[tuple[Path, int]]:
    found = []
    for path in paths:
        with pymupdf.open(str(path)) as document:
            found += [(path, index) for index in range(document.page_count)]
    return found


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Path, int]]:
    folder = tmp_path_factory.mktemp("drawing")
    turned = [turned_pdf(folder / f"turned-{r}.pdf", r) for r in (0, 90, 180, 270)]
    return pages(sorted(SAMPLES.glob("*.pdf")) + turned)


def test_the_images_are_found_where_the_page_itself_finds_them(
    documents: list[tuple[Path, int]],
) -> None:
    found_images = 0
    for path, index in documents:
        with pymupdf.open(str(path)) as first, pymupdf.open(str(path)) as second:
            expected = [c for info in first[index].get_image_info() for c in info["bbox"]]
            found = [c for info in _image_info(second[index]) for c in info["bbox"]]
            assert found == pytest.approx(expected, abs=0.01), (path.name, index)
            found_images += len(found) // 4
    assert found_images >= 4  # the turned pages' image, at least


def test_the_text_layer_is_read_as_from_the_page(documents: list[tuple[Path, int]]) -> None:
    for path, index in documents:
        with pymupdf.open(str(path)) as first, pymupdf.open(str(path)) as second:
            drawn = first[index].get_textpage(flags=_TEXT_LAYER_FLAGS).extractDICT()
            recorded_page = second[index]
            read = read_text_layer(recorded_page)
            assert read == read_text_layer(first[index]), (path.name, index)
            # The reading behind it, block for block.
            assert _text_page(recorded_page, _TEXT_LAYER_FLAGS).extractDICT() == drawn


@pytest.mark.parametrize("colorspace", [pymupdf.csGRAY, pymupdf.csRGB], ids=["grey", "rgb"])
def test_page_images_are_the_pages_own_pixels(
    documents: list[tuple[Path, int]], colorspace: pymupdf.Colorspace
) -> None:
    for path, index in documents:
        with pymupdf.open(str(path)) as first, pymupdf.open(str(path)) as second:
            for dpi in (36, 150):
                drawn = first[index].get_pixmap(dpi=dpi, colorspace=colorspace, alpha=False)
                recorded = page_pixmap(second[index], dpi, colorspace)
                assert recorded.irect == drawn.irect, (path.name, index, dpi)
                assert recorded.samples == drawn.samples, (path.name, index, dpi)


def test_the_drawing_is_recorded_once_a_page_and_the_ink_measured_from_it(
    documents: list[tuple[Path, int]],
) -> None:
    from pagemill.documents.facts import INK_DPI, INK_MAX_SIDE_PX, _darkness

    for path, index in documents:
        with pymupdf.open(str(path)) as first, pymupdf.open(str(path)) as second:
            page = first[index]
            recording = page_drawing(page)
            ink = ink_fraction(page)
            ink_blobs(page)
            assert page_drawing(page) is recording  # recorded once, whatever is measured
            # Drawn from the page itself at the resolution ink_fraction picks for it.
            side_in = max(page.rect.width, page.rect.height) / 72
            dpi = min(INK_DPI, int(INK_MAX_SIDE_PX / side_in))
            drawn = second[index].get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY, alpha=False)
            assert ink == _darkness(drawn.samples), (path.name, index)
