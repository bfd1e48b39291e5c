"""Routing and the CPU engines on real documents, with no servers."""

from __future__ import annotations

import re
from pathlib import Path

import pymupdf
import pytest
from rapidfuzz.distance import Levenshtein

from pagemill.domain import SourceKind
from tests.conftest import SAMPLES
from worker.engines.base import EngineResult, PageInput
from worker.engines.registry import get_engine
from worker.engines.router import Route, route_page
from worker.render import RenderedPage, render_pages

# Measured on this machine's kind with rapidocr 3.10.0's bundled models at 150 dpi:
# 0.000 on the clean scanned sentence and 0.021 on the noisy scanned invoice, against
# the born-digital invoice's own words in reading order. The thresholds leave room
# for numeric noise across CPUs, not for a real regression.
SENTENCE_CER_MAX = 0.02
SCANNED_INVOICE_CER_MAX = 0.06
SENTENCE = (
    "Docling bundles PDF document conversion to JSON and Markdown in an easy self contained package"
)


def normalise(text: str) -> str:
    text = re.sub(r"<!--.*?-->", " ", text)
    text = re.sub(r"[#*_|`>\-]+", " ", text)
    return re.sub(r"\s+", " ", text).strip().lower()


def cer(hypothesis: str, reference: str) -> float:
    hypothesis, reference = normalise(hypothesis), normalise(reference)
    return Levenshtein.distance(hypothesis, reference) / max(1, len(reference))


def render_one(path: Path, kind: SourceKind, number: int = 1) -> RenderedPage:
    return next(iter(render_pages(path, kind, [number], 150, 40_000_000)))


def as_input(page: RenderedPage) -> PageInput:
    return PageInput(page.facts, page.image_png, page.image_dpi, page.pdf_page)


def read_auto(page: RenderedPage) -> tuple[Route, EngineResult]:
    """The page through the engine `auto` routes it to, checks left out."""
    route = route_page("auto", page.facts, page.pdf_page is not None, "rapidocr")
    return route, get_engine(route.engine).convert(as_input(page))


def test_router_sends_born_digital_to_textlayer_and_scans_to_ocr() -> None:
    for number in (1, 2, 3):
        page = render_one(SAMPLES / "invoice-multipage.pdf", SourceKind.pdf, number)
        assert route_page("auto", page.facts, True, "rapidocr").engine == "textlayer"
    scanned_pdf = render_one(SAMPLES / "scanned-sentence.pdf", SourceKind.pdf)
    route = route_page("auto", scanned_pdf.facts, True, "rapidocr")
    assert route.engine == "rapidocr" and "no usable text layer" in route.reason
    image = render_one(SAMPLES / "scanned-invoice.png", SourceKind.png)
    assert route_page("auto", image.facts, False, "rapidocr").engine == "rapidocr"
    # An explicit request wins where it can be honoured, and says so.
    born_digital = render_one(SAMPLES / "invoice-multipage.pdf", SourceKind.pdf, 2)
    assert route_page("rapidocr", born_digital.facts, True, "rapidocr").reason == (
        "requested by the job"
    )


def test_router_distrusts_invisible_ocr_layers(tmp_path: Path) -> None:
    # A scan with an invisible OCR text layer on top, as scanners produce.
    document = pymupdf.open()
    page = document.new_page(width=595, height=842)
    page.insert_image(page.rect, filename=str(SAMPLES / "scanned-invoice.png"))
    page.insert_text((72, 100), "Invoice INV/2023/03/0008 total 279.84 " * 3, render_mode=3)
    path = tmp_path / "ocr-layer.pdf"
    document.save(path)
    rendered = render_one(path, SourceKind.pdf)
    assert rendered.facts.invisible_text_chars == rendered.facts.text_chars > 25
    route = route_page("auto", rendered.facts, True, "rapidocr")
    assert route.engine == "rapidocr" and "invisible" in route.reason


def test_textlayer_engine_keeps_the_invoice_table() -> None:
    page = render_one(SAMPLES / "invoice-multipage.pdf", SourceKind.pdf, 2)
    route, result = read_auto(page)
    markdown = result.markdown
    assert route.engine == "textlayer"
    assert "INV/2023/03/0008" in markdown
    assert re.search(r"^\|.*Description.*\|.*Amount.*\|$", markdown, re.MULTILINE)
    assert re.search(r"^\|(\s*-+\s*\|)+$", markdown, re.MULTILINE)  # a header separator
    assert result.device_seconds > 0


def test_rapidocr_reads_the_scanned_sentence() -> None:
    page = render_one(SAMPLES / "scanned-sentence.pdf", SourceKind.pdf)
    route, result = read_auto(page)
    assert route.engine == "rapidocr"
    assert cer(result.markdown, SENTENCE) <= SENTENCE_CER_MAX


def test_rapidocr_on_a_noisy_scanned_invoice() -> None:
    page = render_one(SAMPLES / "scanned-invoice.png", SourceKind.png)
    route, result = read_auto(page)
    markdown = result.markdown
    assert route.engine == "rapidocr"
    for expected in ("Azure Interior", "CUSTREF123", "279.84", "Office Chair", "Beeswax"):
        assert expected in markdown, expected
    with pymupdf.open(SAMPLES / "invoice-multipage.pdf") as document:
        reference = " ".join(word[4] for word in document[1].get_text("words", sort=True))
    measured = cer(markdown, reference)
    print(f"scanned invoice CER {measured:.3f}")
    assert measured <= SCANNED_INVOICE_CER_MAX


@pytest.mark.parametrize("dpi_budget", [2_000_000])
def test_render_respects_the_pixel_budget(dpi_budget: int) -> None:
    [page] = render_pages(SAMPLES / "invoice-multipage.pdf", SourceKind.pdf, [2], 300, dpi_budget)
    assert page.image_width_px * page.image_height_px <= dpi_budget
    assert page.image_dpi < 300
