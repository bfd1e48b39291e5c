"""A VLM's grounded answer to the blocks layer (DeepSeek-OCR's grounding tags)."""

from __future__ import annotations

import pymupdf
import pytest

from pagemill.documents.blocks import BlockKind
from worker.engines.base import PageFacts, PageInput
from worker.engines.vllm.engine import VllmEngine
from worker.engines.vllm.grounding import blocks_from_grounding, png_size
from worker.engines.vllm.profiles import get_profile

# What DeepSeek-OCR writes in grounding mode (from its model card's examples), and a table.
GROUNDED = (
    "<|ref|>title<|/ref|><|det|>[[112, 64, 530, 98]]<|/det|>\n# Invoice 2041\n\n"
    "<|ref|>text<|/ref|><|det|>[[112, 130, 880, 170], [112, 172, 600, 190]]<|/det|>\n"
    "Total due: 412 EUR\nPayable within 30 days\n\n"
    "<|ref|>image<|/ref|><|det|>[[700, 40, 880, 120]]<|/det|>\n"
    "<|ref|>table<|/ref|><|det|>[[100, 400, 900, 500]]<|/det|>\n"
    "<table><tr><td>Item</td><td>Amount</td></tr><tr><td>Chair</td><td>70.00</td></tr></table>\n"
    "<|ref|>footer<|/ref|><|det|>[[450, 960, 550, 980]]<|/det|>\nPage 1 of 2\n"
    "<\uff5cend\u2581of\u2581sentence\uff5c>"
)
WIDTH, HEIGHT = 595.0, 842.0


def test_grounded_blocks_have_their_kinds_texts_and_boxes_in_points() -> None:
    page = blocks_from_grounding(GROUNDED, 2, WIDTH, HEIGHT, "vllm")
    assert page is not None
    assert (page.page, page.engine, page.width_pt, page.height_pt) == (2, "vllm", WIDTH, HEIGHT)
    # The picture holds no text and gives no block.
    assert [(b.kind, b.text) for b in page.blocks] == [
        (BlockKind.HEADING, "Invoice 2041"),
        (BlockKind.TEXT, "Total due: 412 EUR\nPayable within 30 days"),
        (BlockKind.TABLE, "Item Amount\nChair 70.00"),
        (BlockKind.FURNITURE, "Page 1 of 2"),
    ]
    title, text, *_ = page.blocks
    assert title.box == (
        round(112 / 999 * WIDTH, 2),
        round(64 / 999 * HEIGHT, 2),
        round(530 / 999 * WIDTH, 2),
        round(98 / 999 * HEIGHT, 2),
    )
    # A block written with two boxes stands in their union; its lines lie within it.
    assert text.box[2] == round(880 / 999 * WIDTH, 2) and text.box[3] == round(
        190 / 999 * HEIGHT, 2
    )
    assert all(line.box == text.box and line.words == [] for line in text.lines)


def test_an_answer_without_grounding_gives_no_blocks_and_bad_boxes_are_skipped() -> None:
    assert blocks_from_grounding("# Invoice 2041\n\nTotal due", 1, WIDTH, HEIGHT, "vllm") is None
    page = blocks_from_grounding(
        "<|ref|>text<|/ref|><|det|>[[1, 2, oops<|/det|>\nlost\n", 1, WIDTH, HEIGHT, "vllm"
    )
    assert page is not None and page.blocks == []


def test_png_size_reads_the_header() -> None:
    pixmap = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 37, 53), False)
    assert png_size(pixmap.tobytes("png")) == (37, 53)
    assert png_size(b"GIF89a...") is None


@pytest.mark.parametrize(("profile", "grounded"), [("deepseek-ocr", True), ("olmocr-2", False)])
def test_the_vllm_engine_gives_blocks_only_for_a_grounding_profile(
    profile: str, grounded: bool
) -> None:
    # Rendered at 144 dpi, an A4 page is 1190 x 1684 px: the blocks' page is its size in points.
    engine = VllmEngine(profile=get_profile(profile))
    try:
        png = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 1190, 1684), False).tobytes("png")
        page = PageInput(PageFacts.image_only(2, 595.0, 842.0), png, 144)
        blocks = engine._blocks(GROUNDED, page)
    finally:
        engine.shutdown(0)
    if not grounded:
        assert blocks is None
        return
    assert blocks is not None
    assert (blocks.page, blocks.engine, blocks.width_pt, blocks.height_pt) == (
        2,
        "vllm",
        round(1190 * 72 / 144, 2),
        round(1684 * 72 / 144, 2),
    )
    assert blocks.blocks[0].text == "Invoice 2041"
