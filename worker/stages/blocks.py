"""The blocks layer kept with a page: what the engine that read it gave, on the page read."""

from __future__ import annotations

from pagemill.documents.blocks import PageBlocks
from worker.engines.base import PageFacts
from worker.stages.quality import Assessed


def page_blocks(assessed: Assessed, facts: PageFacts) -> PageBlocks | None:
    """The engine's blocks, on the page as it was read (turned upright before OCR, with
    the turn recorded); an empty page's for a blank page no engine read; None when the
    engine gives no boxes (a VLM profile without grounding)."""
    blocks = assessed.result.blocks
    if blocks is None and assessed.blank:
        blocks = PageBlocks(
            page=facts.number,
            width_pt=facts.width_pt,
            height_pt=facts.height_pt,
            engine=assessed.engine,
        )
    turned = assessed.orientation.rotation if assessed.orientation is not None else 0
    if blocks is not None and turned:
        blocks = blocks.model_copy(update={"rotation": turned})
    return blocks
