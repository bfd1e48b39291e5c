"""Born-digital pages straight from the PDF text layer: exact text, no OCR."""

from __future__ import annotations

import time
from typing import Any

import pymupdf

from worker.engines._pymupdf4llm import chunks_markdown, page_chunks
from worker.engines.base import CPU_ENGINE_RENDER_DPI, EngineError, EngineResult, PageInput
from worker.engines.blocks_textlayer import LayoutRegion, blocks_from_text_layer, layout_regions


class TextLayerEngine:
    name = "textlayer"
    # The page image is not read; 150 dpi keeps the stored preview useful and cheap.
    render_dpi = CPU_ENGINE_RENDER_DPI

    def convert(self, page: PageInput) -> EngineResult:
        if page.pdf_page is None:
            raise EngineError("This page is an image and has no text layer.")
        started = time.process_time()
        details: dict[str, Any] = {}
        layout: list[LayoutRegion] | None = None
        with pymupdf.open(stream=page.pdf_page, filetype="pdf") as document:
            if page.fallback is None:
                chunks = page_chunks(document, use_ocr=False)
                markdown = chunks_markdown(chunks)
                layout = [
                    r for chunk in chunks for r in layout_regions(chunk.get("page_boxes", ()))
                ]
            else:
                markdown = plain_text(document)
                details["fallback"] = f"read as plain text: {page.fallback}"
        # From the page's own bytes: the reading above took the page's /Rotate off its copy.
        blocks = blocks_from_text_layer(page.pdf_page, page.facts.number, self.name, layout)
        return EngineResult(
            markdown=markdown,
            device_seconds=time.process_time() - started,
            device_kind="cpu",
            finish_reason="stop",
            details=details,
            blocks=blocks,
        )


def plain_text(document: pymupdf.Document) -> str:
    """The text in reading order, paragraphs apart, with no layout analysis: MuPDF's own
    text extraction takes a second where layout analysis of the same page takes minutes."""
    page = document.load_page(0)
    blocks = page.get_text("blocks", sort=True)
    paragraphs = (" ".join(str(block[4]).split()) for block in blocks if block[6] == 0)
    return "\n\n".join(paragraph for paragraph in paragraphs if paragraph)
