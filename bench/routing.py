"""Figure 6 (routing saving): on the invoice corpus, the share of pages `auto`
sends to the text layer instead of OCR, and the GPU time that saves at
jina-ocr-v1's published 0.39 GPU-seconds a page (2.57 pages/s on an A100).

The corpus: ../shared/corpus/invoice2data/tests/compare/*.pdf where present,
plus samples/ and tests/fixtures/corpus/ (always in a clone).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import ROOT, Plan

GPU_SECONDS_PER_PAGE = 1 / 2.57  # jina-ocr-v1, A100 40GB, concurrency 32
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp"}


def corpus() -> list[Path]:
    """Each document once: the test fixtures copy some of the shared corpus."""
    shared = ROOT.parent / "shared/corpus/invoice2data/tests/compare"
    candidates = sorted(shared.glob("*.pdf")) if shared.is_dir() else []
    for folder in (ROOT / "samples", ROOT / "tests/fixtures/corpus"):
        candidates += sorted(
            p for p in folder.iterdir() if p.suffix.lower() in {".pdf", *IMAGE_SUFFIXES}
        )
    files, seen = [], set()
    for path in candidates:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest not in seen:
            seen.add(digest)
            files.append(path)
    return files


def run(plan: Plan, log: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    import pymupdf

    from worker.engines.router import route_page
    from worker.render import pdf_page_facts

    files = corpus()
    rows = []
    for path in files:
        if path.suffix.lower() in IMAGE_SUFFIXES:
            rows.append((path.name, 1, "rapidocr", "the page is an image"))
            continue
        with pymupdf.open(str(path)) as document:
            for page in document:
                facts = pdf_page_facts(page, page.number + 1)
                route = route_page("auto", facts, True, "rapidocr")
                rows.append((f"{path.name} p{page.number + 1}", 1, route.engine, route.reason))
    pages = len(rows)
    no_ocr = sum(1 for row in rows if row[2] == "textlayer")
    shared = any("shared/corpus" in str(path) for path in files)
    log(f"  routing: {no_ocr} of {pages} pages need no OCR")
    return {
        "routing": {
            "title": "Routing saving",
            "unit": "share of pages",
            "inputs": f"{len(files)} files, {pages} pages: "
            + ("invoice2data compare set, " if shared else "")
            + "samples/, tests/fixtures/corpus/",
            "pages": pages,
            "pages_without_ocr": no_ocr,
            "share_without_ocr": no_ocr / pages if pages else 0.0,
            "gpu_seconds_per_page": GPU_SECONDS_PER_PAGE,
            "gpu_seconds_saved": no_ocr * GPU_SECONDS_PER_PAGE,
            "gpu_seconds_saved_per_1000_pages": 1000 * no_ocr / pages * GPU_SECONDS_PER_PAGE
            if pages
            else 0.0,
            "per_page": [
                {"page": name, "engine": engine, "reason": reason}
                for name, _, engine, reason in rows
            ],
        }
    }
