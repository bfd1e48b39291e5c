"""Born-digital pages straight from the PDF text layer: exact text, no OCR."""

from __future__ import annotations

import time

import pymupdf

from worker.engines._pymupdf4llm import page_to_markdown
from worker.engines.base import CPU_ENGINE_RENDER_DPI, EngineError, EngineResult, PageInput


class TextLayerEngine:
    name = "textlayer"
    # The page image is not read; 150 dpi keeps the stored preview useful and cheap.
    render_dpi = CPU_ENGINE_RENDER_DPI

    def convert(self, page: PageInput) -> EngineResult:
        if page.pdf_page is None:
            raise EngineError("This page is an image and has no text layer.")
        started = time.process_time()
        with pymupdf.open(stream=page.pdf_page, filetype="pdf") as document:
            markdown = page_to_markdown(document, use_ocr=False)
        return EngineResult(
            markdown=markdown,
            compute_seconds=time.process_time() - started,
            device_kind="cpu",
            finish_reason="stop",
        )
