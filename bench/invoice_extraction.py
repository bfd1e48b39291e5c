"""Invoice extraction's cost beside the OCR of the same page, in CPU seconds.

Each corpus invoice (tests/fixtures/invoices) is rendered in greyscale at the OCR
engine's 150 dpi, as a scanner would give it, and read by RapidOcrEngine.convert, which
also gives the page's blocks; pagemill.invoices.extract_invoices then reads the invoice
from those blocks. Both are timed in process time (every thread counted), warm (models
and dateparser's languages loaded), alternating run by run. Target: extraction at most
20 % of the page's OCR.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.common import ROOT, Plan, alternating_runs, cpu_seconds_each, median, summary, verdict

CORPUS = ROOT / "tests" / "fixtures" / "invoices"
TARGET_SHARE = 0.2
OCR_DPI = 150


def scanned_pages(count: int) -> list[tuple[str, bytes]]:
    import pymupdf

    pages = []
    for pdf in sorted(CORPUS.glob("*.pdf"))[:count]:
        with pymupdf.open(str(pdf)) as document:
            pixmap = document[0].get_pixmap(dpi=OCR_DPI, colorspace=pymupdf.csGRAY)
            pages.append((pdf.name, pixmap.tobytes("png")))
    return pages


def run(plan: Plan, log: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    from pagemill.invoices import extract_invoices
    from worker.engines.base import PageFacts, PageInput
    from worker.engines.rapidocr import RapidOcrEngine

    images = scanned_pages(plan.size(1, 3))
    engine = RapidOcrEngine()
    inputs = [
        PageInput(
            facts=PageFacts.image_only(1, width_pt=0, height_pt=0),
            image_png=png,
            image_dpi=OCR_DPI,
        )
        for _, png in images
    ]
    # Warm-up, and the blocks every run reads again.
    blocks = [engine.convert(page).blocks for page in inputs]
    extract_invoices([page for page in blocks if page is not None])
    extraction_cpu, ocr_cpu, shares = alternating_runs(
        plan.runs,
        lambda: cpu_seconds_each(
            blocks, lambda page: extract_invoices([page] if page is not None else [])
        ),
        lambda: cpu_seconds_each(inputs, engine.convert),
        lambda run, extraction_s, ocr_s: log(
            f"  invoice extraction run {run}: {extraction_s * 1000:.1f} ms CPU a page, "
            f"OCR {ocr_s:.2f} s"
        ),
    )
    return {
        "invoice_extraction": {
            "title": "Invoice extraction beside OCR (CPU share)",
            "unit": "extraction CPU s / OCR CPU s",
            "service": "pagemill.invoices.extract_invoices(blocks of the page)",
            "reference": "RapidOcrEngine.convert(PageInput) of the same page",
            "inputs": ", ".join(name for name, _ in images) + f" (greyscale, {OCR_DPI} dpi)",
            "ratio": summary(shares),
            "extraction_cpu_s_per_page": summary(extraction_cpu),
            "ocr_cpu_s_per_page": summary(ocr_cpu),
            **verdict(median(shares), TARGET_SHARE, higher_is_better=False),
        }
    }
