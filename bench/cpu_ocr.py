"""Figure 4 (CPU OCR): the service's rapidocr path versus rapidocr called directly.

The service: worker.engines.rapidocr.RapidOcrEngine.convert on a PageInput (OCR with
word boxes, then worker.engines.ocr_layout to Markdown). The reference: rapidocr.RapidOCR()
called on the same PNG bytes. Both warm (models loaded) before timing.

Side by side, CPU seconds per page (process time, every onnxruntime thread counted)
of the service and of the path it replaced: the page image wrapped in a PDF page and
pymupdf4llm's OCR and layout pass (`previous_path`); target at most 1.5x.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bench.common import ROOT, Plan, median, summary, verdict

if TYPE_CHECKING:
    from worker.engines.base import PageInput


def smoke_image() -> tuple[str, bytes, int]:
    """One short line of text as a 150 dpi image: enough for the smoke run."""
    import pymupdf

    document = pymupdf.open()
    page = document.new_page(width=288, height=54)
    page.insert_text((12, 32), "Invoice 2041, total 412.00 EUR", fontsize=14)
    png = page.get_pixmap(dpi=150, alpha=False).tobytes("png")
    document.close()
    return ("one generated line of text", png, 150)


def page_images(count: int) -> list[tuple[str, bytes, int]]:
    """(name, PNG, dpi) of scanned pages: the samples first, then the test corpus."""
    import pymupdf

    images: list[tuple[str, bytes, int]] = []
    for pdf in (ROOT / "samples/scanned-sentence.pdf", ROOT / "tests/fixtures/corpus/ocr_test.pdf"):
        if pdf.exists():
            with pymupdf.open(str(pdf)) as document:
                png = document[0].get_pixmap(dpi=150, alpha=False).tobytes("png")
            images.append((f"{pdf.name} p1", png, 150))
    invoice = ROOT / "samples/scanned-invoice.png"
    if invoice.exists():
        images.append((invoice.name, invoice.read_bytes(), 150))
    return images[:count]


def run(plan: Plan, log: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    from rapidocr import RapidOCR

    from worker.engines.base import PageFacts, PageInput
    from worker.engines.rapidocr import RapidOcrEngine

    images = [smoke_image()] if plan.smoke else page_images(3)
    pages = [
        PageInput(
            facts=PageFacts.image_only(index + 1, width_pt=0, height_pt=0),
            image_png=png,
            image_dpi=dpi,
        )
        for index, (_, png, dpi) in enumerate(images)
    ]
    service = RapidOcrEngine()
    direct = RapidOCR()

    def time_service() -> float:
        started = time.perf_counter()
        for page in pages:
            service.convert(page)
        return len(pages) / (time.perf_counter() - started)

    def time_direct() -> float:
        started = time.perf_counter()
        for _, png, _ in images:
            direct(png)
        return len(pages) / (time.perf_counter() - started)

    def cpu_per_page(convert: Callable[[PageInput], object]) -> float:
        started = time.process_time()
        for page in pages:
            convert(page)
        return (time.process_time() - started) / len(pages)

    # Warm-up: model loading and first-run allocations are not per page.
    service.convert(pages[0])
    direct(images[0][1])
    previous_path(pages[0])
    service_cpu: list[float] = []
    previous_cpu: list[float] = []
    for index in range(plan.runs):
        pair = [(service_cpu, service.convert), (previous_cpu, previous_path)]
        for seconds, convert in pair[:: -1 if index % 2 else 1]:
            seconds.append(cpu_per_page(convert))
        log(
            f"  cpu ocr run {index + 1}: {service_cpu[-1]:.2f} CPU s a page, "
            f"previous path {previous_cpu[-1]:.2f}"
        )
    cpu_ratios = [s / p for s, p in zip(service_cpu, previous_cpu, strict=True)]
    service_rates, direct_rates = [], []
    for index in range(plan.runs):
        # Alternate the order so drift in machine load falls on both sides.
        if index % 2:
            direct_rates.append(time_direct())
            service_rates.append(time_service())
        else:
            service_rates.append(time_service())
            direct_rates.append(time_direct())
        log(
            f"  cpu ocr run {index + 1}: service {service_rates[-1]:.3f}, "
            f"rapidocr direct {direct_rates[-1]:.3f} pages/s"
        )
    ratios = [s / d for s, d in zip(service_rates, direct_rates, strict=True)]
    return {
        "cpu_ocr": {
            "title": "CPU OCR",
            "unit": "ratio of pages/s",
            "service": "RapidOcrEngine.convert(PageInput): OCR with word boxes + ocr_layout",
            "reference": "rapidocr.RapidOCR()(png) on the same images (boxes and text only)",
            "inputs": ", ".join(name for name, _, _ in images) + " (150 dpi)",
            "ratio": summary(ratios),
            "cpu_s_per_page": summary(service_cpu),
            "previous_cpu_s_per_page": summary(previous_cpu),
            "cpu_ratio_to_previous": summary(cpu_ratios),
            "cpu_ratio_target": 1.5,
            "cpu_ratio_met": bool(median(cpu_ratios) <= 1.5),
            "service_pages_per_s": summary(service_rates),
            "reference_pages_per_s": summary(direct_rates),
            **verdict(median(ratios), 0.9),
        }
    }


def previous_path(page: PageInput) -> str:
    """The CPU OCR path before ocr_layout: the image wrapped in a PDF page (sized by
    PyMuPDF's reading of the PNG), OCR and layout by pymupdf4llm."""
    import pymupdf

    from worker.engines._pymupdf4llm import page_to_markdown

    png = page.require_image()
    with pymupdf.open(stream=png, filetype="png") as image:
        width_px, height_px = image[0].rect.width, image[0].rect.height
    scale = 72.0 / page.image_dpi
    with pymupdf.open() as document:
        pdf_page = document.new_page(width=width_px * scale, height=height_px * scale)
        pdf_page.insert_image(pdf_page.rect, stream=png)
        return page_to_markdown(document, force_ocr=True, ocr_dpi=page.image_dpi)
