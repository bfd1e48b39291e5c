"""Which blocks a page keeps: the engine's, a blank page's, and the turn of a page read upright."""

from __future__ import annotations

from pagemill.documents.blocks import Block, BlockKind, PageBlocks
from worker.engines.base import EngineResult, PageFacts
from worker.orientation import Orientation
from worker.stages.blocks import page_blocks
from worker.stages.quality import Assessed

FACTS = PageFacts.image_only(2, width_pt=595.0, height_pt=842.0)
READ = PageBlocks(
    page=2,
    width_pt=842.0,
    height_pt=595.0,
    engine="rapidocr",
    blocks=[Block(kind=BlockKind.TEXT, box=(10, 10, 100, 20))],
)


def assessed(
    blocks: PageBlocks | None, blank: bool = False, rotation: int | None = None
) -> Assessed:
    result = EngineResult(markdown="", device_seconds=0.0, blocks=blocks)
    orientation = (
        None if rotation is None else Orientation(rotation, "classifier", 12, 3.0, 1024, 0.1)
    )
    return Assessed("rapidocr", result, blank, [], 1.0, "ok", None, orientation)


def test_a_page_turned_upright_before_ocr_keeps_the_turn_with_its_boxes() -> None:
    kept = page_blocks(assessed(READ, rotation=90), FACTS)
    assert kept is not None
    assert kept.rotation == 90
    assert (kept.width_pt, kept.height_pt, kept.blocks) == (842.0, 595.0, READ.blocks)
    assert page_blocks(assessed(READ, rotation=0), FACTS) == READ


def test_a_blank_page_keeps_an_empty_page_and_an_engine_without_boxes_nothing() -> None:
    blank = page_blocks(assessed(None, blank=True), FACTS)
    assert blank == PageBlocks(page=2, width_pt=595.0, height_pt=842.0, engine="rapidocr")
    assert page_blocks(assessed(None), FACTS) is None
