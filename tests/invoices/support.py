"""Blocks of test invoices: the corpus' PDFs read by the text layer's blocks builder,
PDFs with printed values changed, and pages written line by line."""

from __future__ import annotations

import json
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pymupdf

from pagemill.documents.blocks import Block, BlockKind, Line, PageBlocks, Word
from tests.support.services import ROOT
from worker.engines.blocks_textlayer import blocks_from_text_layer

CORPUS = ROOT / "tests" / "fixtures" / "invoices"


def pdf_blocks(document: pymupdf.Document) -> list[PageBlocks]:
    pages = []
    for index in range(document.page_count):
        one = pymupdf.open()
        one.insert_pdf(document, from_page=index, to_page=index)
        pages.append(blocks_from_text_layer(one.tobytes(), index + 1, "textlayer"))
    return pages


def corpus_blocks(name: str) -> list[PageBlocks]:
    with pymupdf.open(CORPUS / f"{name}.pdf") as document:
        return pdf_blocks(document)


def corpus_truth(name: str) -> dict[str, Any]:
    record: dict[str, Any] = json.loads((CORPUS / f"{name}.json").read_text())[0]
    return record


def altered(name: str, changes: dict[str, str]) -> pymupdf.Document:
    """The corpus PDF with each printed `old` text replaced by `new` in its place:
    redacted, then written with a base font at the old text's size."""
    document = pymupdf.open(CORPUS / f"{name}.pdf")
    for page in document.pages():
        placed = []
        for old, new in changes.items():
            for rect in page.search_for(old):
                page.add_redact_annot(rect)
                placed.append((rect, new))
        page.apply_redactions(images=0)  # PDF_REDACT_IMAGE_NONE: keep images
        for rect, new in placed:
            size = max(rect.height * 0.75, 4)
            page.insert_text((rect.x0, rect.y1 - rect.height * 0.22), new, fontsize=size)
    return document


def written_page(
    lines: Sequence[tuple[float, float, str]], page: int = 1, tilt: float = 0.0
) -> PageBlocks:
    """A page whose lines are given as (x, y, text); words 5 pt a character, 10 pt tall,
    each dropped by `tilt` points per point from the left edge (a skewed scan)."""
    blocks = []
    for x, y, text in lines:
        words = []
        cursor = x
        for token in text.split(" "):
            if not token:
                cursor += 5
                continue
            top = y + tilt * cursor
            words.append(Word(text=token, box=(cursor, top, cursor + 5 * len(token), top + 10)))
            cursor += 5 * len(token) + 5
        box = (
            x,
            min(word.box[1] for word in words),
            cursor - 5,
            max(word.box[3] for word in words),
        )
        line = Line(text=" ".join(word.text for word in words), box=box, words=words)
        blocks.append(Block(kind=BlockKind.TEXT, box=box, lines=[line]))
    return PageBlocks(page=page, width_pt=595, height_pt=842, engine="test", blocks=blocks)


def amount(value: Any) -> Decimal:
    return Decimal(str(value)).quantize(Decimal("0.01"))
