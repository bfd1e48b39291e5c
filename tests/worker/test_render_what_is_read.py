"""Prepare makes only what a page's engine reads: the one-page PDF for a text layer
page, the image for an OCR page; a text layer page is rendered later only when a
check or repair needs its pixels."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pymupdf
import pytest

from pagemill.documents.sandbox import Limits, run_sandboxed
from pagemill.domain import SourceKind
from tests.conftest import SAMPLES
from tests.worker.test_router_and_engines import SENTENCE, SENTENCE_CER_MAX, cer
from worker import render
from worker.engines.base import EngineError, EngineResult, PageInput
from worker.engines.registry import get_engine
from worker.render import PageOutputs, render_pages, render_pdf_page_png
from worker.stages import quality
from worker.stages.quality import convert_checked

INVOICE = SAMPLES / "invoice-multipage.pdf"
SCANNED_SENTENCE = SAMPLES / "scanned-sentence.pdf"
LIMITS = Limits(memory_bytes=2 * 1024**3, cpu_s=60, wall_s=60)


def _convert(engine: str, page: PageInput) -> EngineResult:
    return get_engine(engine).convert(page)


def _text_layer_input(path: Path) -> PageInput:
    """A page as the OCR stage loads a text layer page now: the PDF and no image."""
    only_pdf = PageOutputs(image=False, pdf_page=True)
    [page] = render_pages(path, SourceKind.pdf, [1], 150, 40_000_000, lambda _: only_pdf)
    return PageInput(page.facts, page.image_png, page.image_dpi, page.pdf_page)


def test_outputs_follow_what_the_page_needs() -> None:
    only_pdf = PageOutputs(image=False, pdf_page=True)
    only_image = PageOutputs(image=True, pdf_page=False)
    [text_page] = render_pages(INVOICE, SourceKind.pdf, [1], 150, 40_000_000, lambda _: only_pdf)
    assert text_page.image_png is None
    assert text_page.image_width_px is None and text_page.image_height_px is None
    assert text_page.pdf_page is not None and text_page.pdf_page.startswith(b"%PDF")
    assert text_page.image_dpi == 150
    assert text_page.facts.text_chars > 100  # facts are always made: routing needs them

    [ocr_page] = render_pages(INVOICE, SourceKind.pdf, [1], 150, 40_000_000, lambda _: only_image)
    assert ocr_page.pdf_page is None
    assert ocr_page.image_png is not None and ocr_page.image_png.startswith(b"\x89PNG")

    # Rendered later from the one-page PDF, the page is the same pixels prepare would make.
    assert render_pdf_page_png(text_page.pdf_page, 150) == ocr_page.image_png


def test_the_render_child_routes_and_writes_only_what_the_engine_reads(tmp_path: Path) -> None:
    # SCANNED_SENTENCE has no text layer: auto sends it to OCR; INVOICE to the text layer.
    for source, expected_engine in ((INVOICE, "textlayer"), (SCANNED_SENTENCE, "rapidocr")):
        out = tmp_path / source.stem
        out.mkdir()
        args = [str(source), "pdf", "150", "40000000", str(out), "1", "auto", "rapidocr"]
        [line] = run_sandboxed("worker.render_child", args, LIMITS)
        assert line["engine"] == expected_engine, line
        if expected_engine == "textlayer":
            assert line["image_path"] is None and line["image_width_px"] is None
            assert Path(line["pdf_path"]).read_bytes().startswith(b"%PDF")
            assert sorted(path.name for path in out.iterdir()) == ["1.pdf"]
        else:
            assert line["pdf_path"] is None
            assert Path(line["image_path"]).read_bytes().startswith(b"\x89PNG")
            assert sorted(path.name for path in out.iterdir()) == ["1.png"]


def test_a_text_layer_page_with_visible_text_is_never_rendered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    page = _text_layer_input(INVOICE)

    def refuse(_pdf: bytes, _dpi: int) -> bytes:
        raise AssertionError("a page with visible text and output needs no pixels")

    monkeypatch.setattr(render, "render_pdf_page_png", refuse)
    assessed = convert_checked("textlayer", page, _convert, "rapidocr")
    assert assessed.engine == "textlayer"
    assert assessed.blank is False  # its visible text is ink
    assert assessed.verdict == "ok" and assessed.repair is None
    assert {check.name for check in assessed.checks} >= {"empty_output", "blank_invented"}
    assert "Azure Interior" in assessed.result.markdown


def test_an_empty_text_layer_is_rendered_and_read_by_ocr() -> None:
    # A scan routed to the text layer by request: the layer gives nothing, so the page is
    # rendered from its one-page PDF, found to have ink, and read by OCR instead.
    page = _text_layer_input(SCANNED_SENTENCE)
    assert page.image_png is None
    assessed = convert_checked("textlayer", page, _convert, "rapidocr")
    assert assessed.blank is False
    assert assessed.repair == "read by OCR instead of the text layer"
    assert assessed.engine == "rapidocr" and assessed.verdict == "repaired"
    assert cer(assessed.result.markdown, SENTENCE) <= SENTENCE_CER_MAX
    assert assessed.orientation is not None  # read by OCR, so turned upright first


def test_an_ocr_engine_without_an_image_says_so() -> None:
    page = dataclasses.replace(_text_layer_input(INVOICE), pdf_page=None)
    with pytest.raises(EngineError, match="no page image"):
        get_engine("rapidocr").convert(page)


def _ocr_input(path: Path) -> PageInput:
    """A page as the OCR stage loads an OCR page: the image and no PDF."""
    only_image = PageOutputs(image=True, pdf_page=False)
    [page] = render_pages(path, SourceKind.pdf, [1], 150, 40_000_000, lambda _: only_image)
    return PageInput(page.facts, page.image_png, page.image_dpi, None)


def _refuse_decoding(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    decoded: list[int] = []

    def counting(png: bytes) -> object:
        decoded.append(len(png))
        return real_decode(png)

    real_decode = quality.decode_gray
    monkeypatch.setattr(quality, "decode_gray", counting)
    return decoded


def test_an_ocr_page_drawing_text_is_read_without_decoding_its_image(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Its text layer shows it is not blank and which way up it lies: no pixels needed.
    page = _ocr_input(INVOICE)
    decoded = _refuse_decoding(monkeypatch)
    assessed = convert_checked("rapidocr", page, _convert, "rapidocr")
    assert decoded == []
    assert assessed.blank is False
    assert assessed.orientation is not None and assessed.orientation.decided_by == "text layer"
    assert "Azure" in assessed.result.markdown


def test_a_page_drawing_only_a_page_number_is_still_found_blank(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    source = tmp_path / "page-number.pdf"
    document = pymupdf.open()
    document.new_page(width=595, height=842).insert_text((290, 830), "7", fontsize=9)
    document.save(source)
    page = _ocr_input(source)
    assert 0 < page.facts.text_chars < quality.DRAWN_TEXT_MIN_CHARS
    decoded = _refuse_decoding(monkeypatch)
    assessed = convert_checked("rapidocr", page, _convert, "rapidocr")
    assert len(decoded) == 1  # too little text to tell: its pixels are looked at
    assert assessed.blank is True
    assert assessed.result.markdown == ""
