"""Figure 4 (CPU OCR): the service's rapidocr path versus rapidocr called directly.

The service: worker.engines.rapidocr.RapidOcrEngine.convert on a PageInput (OCR with
word boxes, then worker.engines.ocr_layout to Markdown). The reference: rapidocr.RapidOCR()
called on the same PNG bytes, on the same thread count (cpu_engine_threads). Both warm
(models loaded) before timing.

Side by side, CPU seconds per page (process time, every onnxruntime thread counted)
of the service and of the path it replaced: the page image wrapped in a PDF page and
pymupdf4llm's OCR and layout pass (`previous_path`); target at most 1.5x.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bench.common import ROOT, Plan, alternating_runs, cpu_seconds_each, median, summary, verdict

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

    from pagemill.settings import get_settings
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
    # The reference on the thread count the service's calls run on in a worker (one a
    # call by default, worker.engines.rapidocr): the figure is the service's own overhead.
    threads = get_settings().cpu_engine_threads
    service = RapidOcrEngine()
    direct = RapidOCR(
        params={
            "EngineConfig.onnxruntime.intra_op_num_threads": threads,
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
        }
    )

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

    # Warm-up: model loading and first-run allocations are not per page.
    service.convert(pages[0])
    direct(images[0][1])
    previous_path(pages[0])
    service_cpu, previous_cpu, cpu_ratios = alternating_runs(
        plan.runs,
        lambda: cpu_seconds_each(pages, service.convert),
        lambda: cpu_seconds_each(pages, previous_path),
        lambda run, service_s, previous_s: log(
            f"  cpu ocr run {run}: {service_s:.2f} CPU s a page, previous path {previous_s:.2f}"
        ),
    )
    service_rates, direct_rates, speed_ratios = alternating_runs(
        plan.runs,
        time_service,
        time_direct,
        lambda run, service_rate, direct_rate: log(
            f"  cpu ocr run {run}: service {service_rate:.3f}, "
            f"rapidocr direct {direct_rate:.3f} pages/s"
        ),
    )
    return {
        "cpu_ocr": {
            "title": "CPU OCR",
            "unit": "ratio of pages/s",
            "service": "RapidOcrEngine.convert(PageInput): OCR with word boxes + ocr_layout",
            "reference": "rapidocr.RapidOCR()(png) on the same images (boxes and text only), "
            f"both on {threads} thread{'s' if threads != 1 else ''} a call, as in a worker",
            "inputs": ", ".join(name for name, _, _ in images) + " (150 dpi)",
            "ratio": summary(speed_ratios),
            "cpu_s_per_page": summary(service_cpu),
            "previous_cpu_s_per_page": summary(previous_cpu),
            "cpu_ratio_to_previous": summary(cpu_ratios),
            "cpu_ratio_target": 1.5,
            "cpu_ratio_met": bool(median(cpu_ratios) <= 1.5),
            "service_pages_per_s": summary(service_rates),
            "reference_pages_per_s": summary(direct_rates),
            **verdict(median(speed_ratios), 0.9),
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
