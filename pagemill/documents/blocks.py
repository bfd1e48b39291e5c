"""The blocks layer: what a page says and where, whatever engine read it.

Each page's text blocks, their lines and words, with boxes in page coordinates
(points, origin at the top left, the page's size given), so a review screen can
highlight a value on the page image and invoice extraction can find a value by
where it sits relative to its label. Engines fill it from what they have: the
text layer's words, the OCR engine's boxes, or the VLM's grounding boxes.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

BLOCKS_SCHEMA_VERSION = 1

# x0, y0, x1, y1 in points from the page's top-left corner.
Box = tuple[float, float, float, float]


class BlockKind(StrEnum):
    TEXT = "text"
    HEADING = "heading"
    TABLE = "table"
    TABLE_CELL = "table_cell"
    FURNITURE = "furniture"  # running headers, footers and page numbers


class Word(BaseModel):
    text: str
    box: Box
    confidence: float | None = None  # the engine's own, 0..1, where it gives one


class Line(BaseModel):
    text: str
    box: Box
    words: list[Word] = Field(default_factory=list)
    confidence: float | None = None


class Block(BaseModel):
    kind: BlockKind
    box: Box
    lines: list[Line] = Field(default_factory=list)
    # Table cells only: their place in the table they belong to (the block before them).
    row: int | None = None
    column: int | None = None

    @property
    def text(self) -> str:
        return "\n".join(line.text for line in self.lines)


class PageBlocks(BaseModel):
    schema_version: int = BLOCKS_SCHEMA_VERSION
    page: int  # 1-based
    width_pt: float
    height_pt: float
    engine: str  # the engine that produced the blocks
    blocks: list[Block] = Field(default_factory=list)
    # Clockwise turn, in degrees (0, 90, 180, 270), from the page as stored (its image, or
    # the PDF page as shown) to the page the boxes are on: a page scanned sideways is read,
    # and its boxes given, upright. A viewer turns the page image by this much first.
    rotation: int = 0
