"""CPU OCR with rapidocr 3.10.0 and its bundled default models.

rapidocr returns boxes and lines; pymupdf4llm's layout pass turns them into
Markdown in reading order, tables included. The page image is wrapped in a PDF
page sized so that re-rendering at the same dpi gives back the same pixels.
"""

from __future__ import annotations

import time

import pymupdf

from worker.engines._pymupdf4llm import page_to_markdown
from worker.engines.base import CPU_ENGINE_RENDER_DPI, EngineResult, PageInput


class RapidOcrEngine:
    name = "rapidocr"
    # rapidocr's detector is tuned for text lines 15-40 px high: 150 dpi puts
    # 9-12 pt body text there without the cost of 300 dpi pages.
    render_dpi = CPU_ENGINE_RENDER_DPI

    def convert(self, page: PageInput) -> EngineResult:
        started = time.process_time()
        with _image_as_pdf(page.require_image(), page.image_dpi) as document:
            markdown = page_to_markdown(document, force_ocr=True, ocr_dpi=page.image_dpi)
        return EngineResult(
            markdown=markdown,
            # onnxruntime runs on several threads: process CPU time counts them all.
            device_seconds=time.process_time() - started,
            device_kind="cpu",
            finish_reason="stop",
        )


def _image_as_pdf(png: bytes, dpi: int) -> pymupdf.Document:
    with pymupdf.open(stream=png, filetype="png") as image:
        width_px, height_px = image[0].rect.width, image[0].rect.height
    document = pymupdf.open()
    scale = 72.0 / dpi
    page = document.new_page(width=width_px * scale, height=height_px * scale)
    page.insert_image(page.rect, stream=png)
    return document
