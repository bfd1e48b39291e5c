"""A born-digital page's text layer says which way up the page is drawn: the turn it
gives agrees with the pixel detector, on pages set every way by /Rotate and by text
drawn sideways; scans and pages with too little text are left to the pixels."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from pagemill.domain import SourceKind
from tests.conftest import SAMPLES
from tests.worker.test_orientation import CORPUS
from worker.engines.base import PageFacts
from worker.imaging import rotate_png
from worker.orientation import TEXT_LAYER, detect_orientation, from_text_layer
from worker.render import PageOutputs, pdf_page_facts, render_pages

INVOICE = CORPUS / "AzureInterior.pdf"
ONLY_IMAGE = PageOutputs(image=True, pdf_page=False)


@pytest.mark.parametrize("page_rotation", [0, 90, 180, 270])
@pytest.mark.parametrize("text_turn", [0, 90])
def test_the_text_layer_turn_agrees_with_the_pixels(
    page_rotation: int, text_turn: int, tmp_path: Path
) -> None:
    # The invoice's page set by /Rotate, and also drawn sideways (text_turn 90: the page
    # shown on a landscape sheet, its lines running up it).
    source = pymupdf.open(INVOICE)
    document = pymupdf.open()
    if text_turn:
        width, height = source[0].rect.height, source[0].rect.width
        sheet = document.new_page(width=width, height=height)
        sheet.show_pdf_page(sheet.rect, source, 0, rotate=text_turn)
    else:
        document.insert_pdf(source, from_page=0, to_page=0)
    document[0].set_rotation(page_rotation)
    path = tmp_path / "page.pdf"
    document.save(path)

    [page] = render_pages(path, SourceKind.pdf, [1], 150, 40_000_000, lambda _: ONLY_IMAGE)
    assert page.image_png is not None
    told = from_text_layer(page.facts)
    assert told is not None and told.decided_by == TEXT_LAYER and told.cpu_seconds == 0
    assert told.rotation == detect_orientation(page.image_png).rotation
    upright = rotate_png(page.image_png, told.rotation)
    assert detect_orientation(upright).rotation == 0
    assert "text layer" in told.describe()


def test_scans_and_pages_with_little_text_are_left_to_the_pixels() -> None:
    scan = CORPUS / "ocr_test_rotated_90.pdf"  # an image with an invisible OCR layer, or none
    with pymupdf.open(scan) as document:
        assert pdf_page_facts(document[0], 1).text_upright_turn is None
    with pymupdf.open(SAMPLES / "scanned-sentence.pdf") as document:
        assert pdf_page_facts(document[0], 1).text_upright_turn is None

    document = pymupdf.open()
    page = document.new_page()
    page.insert_text((72, 72), "Page 3", fontsize=10)  # too little to tell by
    assert pdf_page_facts(page, 1).text_upright_turn is None
    mixed = document.new_page()
    for line in range(6):  # half the text runs across, half up the page: no clear answer
        mixed.insert_text((72, 100 + 20 * line), "Quarterly totals by region", fontsize=11)
        mixed.insert_text((400 + 20 * line, 700), "Quarterly totals by region", rotate=90)
    assert pdf_page_facts(mixed, 2).text_upright_turn is None


def test_facts_stored_by_a_later_release_still_load() -> None:
    stored = {
        "number": 1,
        "width_pt": 595.0,
        "height_pt": 842.0,
        "text_chars": 900,
        "unreadable_chars": 0,
        "invisible_text_chars": 0,
        "image_coverage": 0.0,
        "rotation": 0,
        "text_upright_turn": 0,
        "a_field_added_later": [1, 2],
    }
    facts = PageFacts.from_stored(stored)
    assert facts.text_upright_turn == 0 and facts.text_chars == 900
    del stored["text_upright_turn"]  # and a row recorded before this field existed
    assert PageFacts.from_stored(stored).text_upright_turn is None
