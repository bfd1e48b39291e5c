"""Orientation detection on real page images turned every way, clean and scanned.

Pages are rendered at 150 dpi, the resolution the OCR engine's pages come at. The corpus
files are copies kept in tests/fixtures/corpus (with their licences).
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pymupdf
import pytest
from PIL import Image
from rapidocr import RapidOCR

from tests.worker.test_imaging import pixels_of, to_png
from worker.imaging import rotate_png
from worker.orientation import QUICK_SIDE_PX, THOROUGH_SIDE_PX, detect_orientation

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"
TURNS = [0, 90, 180, 270]
OCR_TEST_WORDS = {"Docling", "bundles", "PDF", "document", "conversion", "JSON", "Markdown"}


def render(pdf_name: str, dpi: int = 150) -> bytes:
    with pymupdf.open(CORPUS / pdf_name) as document:
        return bytes(document[0].get_pixmap(dpi=dpi, alpha=False).tobytes("png"))


def as_scan(png: bytes, seed: int) -> bytes:
    """The page as a cheap scanner gives it: fed 2 degrees askew, sensor noise, JPEG."""
    rng = np.random.default_rng(seed)
    page = Image.open(io.BytesIO(png)).convert("L")
    skewed = page.rotate(2.0, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=255)
    noisy = np.asarray(skewed, dtype=np.float32) + rng.normal(0.0, 20.0, skewed.size[::-1])
    out = io.BytesIO()
    Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)).save(out, format="JPEG", quality=30)
    return to_png(np.asarray(Image.open(io.BytesIO(out.getvalue()))))


def one_line_page(text: str) -> bytes:
    document = pymupdf.open()
    page = document.new_page()  # A4
    page.insert_text((72, 300), text, fontsize=12)
    return bytes(page.get_pixmap(dpi=150, alpha=False).tobytes("png"))


@pytest.fixture(scope="module")
def invoice_png() -> bytes:
    return render("AzureInterior.pdf")


@pytest.fixture(scope="module")
def ocr() -> RapidOCR:
    return RapidOCR(params={"Global.log_level": "error"})


def words_read(ocr: RapidOCR, png: bytes) -> set[str]:
    lines = getattr(ocr(png), "txts", None) or ()
    return {word for line in lines for word in re.findall(r"\w+", line)}


@pytest.mark.parametrize("scanned_turn", TURNS)
def test_a_turned_invoice_is_detected_and_corrected_exactly(
    invoice_png: bytes, scanned_turn: int
) -> None:
    turned = rotate_png(invoice_png, scanned_turn)
    found = detect_orientation(turned)
    assert found.rotation == (360 - scanned_turn) % 360
    # A page full of lines is settled by the cheap pass: the classifier at the quick size.
    assert (found.decided_by, found.detector_side_px) == ("classifier", QUICK_SIDE_PX)
    assert found.lines >= 4
    # Quarter turns are lossless: the corrected page is the upright page, pixel for pixel.
    assert np.array_equal(pixels_of(rotate_png(turned, found.rotation)), pixels_of(invoice_png))


@pytest.mark.parametrize("scanned_turn", TURNS)
def test_a_turned_noisy_skewed_scan_is_detected(invoice_png: bytes, scanned_turn: int) -> None:
    scan = as_scan(invoice_png, seed=scanned_turn)
    assert detect_orientation(rotate_png(scan, scanned_turn)).rotation == (360 - scanned_turn) % 360


@pytest.mark.parametrize("scanned_turn", TURNS)
def test_a_turned_scanned_sentence_is_detected(scanned_turn: int) -> None:
    sentence = render("ocr_test.pdf")
    found = detect_orientation(rotate_png(sentence, scanned_turn))
    assert found.rotation == (360 - scanned_turn) % 360


def test_a_real_sideways_scan_is_detected_and_reads_after_correction(ocr: RapidOCR) -> None:
    # An image-only PDF whose page is turned a quarter turn anticlockwise (/Rotate 270):
    # a scan fed in sideways, as a viewer shows it.
    sideways = render("ocr_test_rotated_90.pdf")
    with Image.open(io.BytesIO(sideways)) as image:
        assert image.width > image.height
    found = detect_orientation(sideways)
    assert found.rotation == 90
    assert found.describe().startswith("turned 90 degrees clockwise")
    upright = pixels_of(rotate_png(sideways, found.rotation))
    assert upright.shape[0] > upright.shape[1]
    # The sentence is in the top quarter of the page; the rest is empty paper.
    assert words_read(ocr, to_png(upright[: upright.shape[0] // 4])) >= OCR_TEST_WORDS


@pytest.mark.parametrize("scanned_turn", [180, 270])
def test_too_little_text_for_the_classifier_is_settled_by_the_recogniser(
    scanned_turn: int,
) -> None:
    # One short line makes too few pieces for the classifier's vote: the recogniser reads
    # it both ways instead, after a second look at the larger size for more lines.
    page = rotate_png(one_line_page("Received with thanks, J. Smith"), scanned_turn)
    found = detect_orientation(page)
    assert found.rotation == (360 - scanned_turn) % 360
    assert (found.decided_by, found.lines) == ("recogniser", 1)
    assert found.detector_side_px == THOROUGH_SIDE_PX


def test_small_type_on_a_large_sheet_gets_a_second_look() -> None:
    # An A3 landscape list in 6.5 pt type: at the quick size its lines are a few pixels high.
    document = pymupdf.open()
    page = document.new_page(width=1191, height=842)
    for row in range(40):
        for column, (label, price) in enumerate((("Oak desk", 17.5), ("Mesh chair", 9.25))):
            text = f"Line {row:02d} {label} with two drawers, delivered  {row * price:8.2f}"
            page.insert_text((60 + 560 * column, 60 + 10 * row), text, fontsize=6.5)
    png = bytes(page.get_pixmap(dpi=150, alpha=False).tobytes("png"))
    found = detect_orientation(rotate_png(png, 90))
    assert (found.rotation, found.detector_side_px) == (270, THOROUGH_SIDE_PX)


def test_a_page_without_text_is_left_as_it_is() -> None:
    rng = np.random.default_rng(3)
    paper = np.clip(rng.normal(235.0, 12.0, (1755, 1240)), 0, 255).astype(np.uint8)
    found = detect_orientation(to_png(paper))
    assert (found.rotation, found.decided_by, found.lines) == (0, "none", 0)
    assert found.describe().startswith("no text line")


def test_the_record_says_what_was_done(invoice_png: bytes) -> None:
    found = detect_orientation(rotate_png(invoice_png, 180))
    record = found.as_dict()
    assert record["rotation"] == 180
    assert record["decided_by"] == "classifier"
    assert 0.4 <= record["lead"] <= 1.0
    assert 0 < record["cpu_seconds"] < 5
