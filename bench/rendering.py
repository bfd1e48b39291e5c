"""Figure 2 (rendering): prepare's rendering versus poppler's `pdftoppm`.

The service: worker.render.render_pages at the OCR engine's resolution (page
facts and the PNG, exactly what prepare's render child makes of a page an OCR
engine reads), and the same plus storing each page image in S3. The
reference: `pdftoppm -png` (what olmOCR renders with) at the same pixel size.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import Plan, make_text_pdf, median, summary, tool_version, verdict

# PNG colour type (the byte after IHDR's width, height and bit depth): 0 is grey.
PNG_GREY = 0


def run(plan: Plan, log: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    from pagemill.domain import SourceKind
    from pagemill.settings import get_settings
    from pagemill.storage import get_object_store
    from worker.engines.registry import render_dpi_for
    from worker.render import PageOutputs, render_pages

    pdftoppm = shutil.which("pdftoppm")
    if pdftoppm is None:
        raise RuntimeError("pdftoppm is missing: apt-get install -y poppler-utils")
    settings = get_settings()
    dpi = render_dpi_for(settings.ocr_engine)
    pages = plan.size(3, 40)
    pdf = make_text_pdf(plan.workdir / "rendering.pdf", pages)
    numbers = list(range(1, pages + 1))
    store = get_object_store()

    grey_pages: set[int] = set()
    # What prepare makes of a page an OCR engine reads: its facts and its image.
    ocr_page = PageOutputs(image=True, pdf_page=False)

    def service(upload: bool) -> tuple[float, tuple[int, int]]:
        started = time.perf_counter()
        size = (0, 0)
        rendered = render_pages(
            pdf, SourceKind.pdf, numbers, dpi, settings.max_render_pixels, lambda _: ocr_page
        )
        for page in rendered:
            assert page.image_png is not None
            size = (page.image_width_px or 0, page.image_height_px or 0)
            if page.image_png[25] == PNG_GREY:
                grey_pages.add(page.facts.number)
            if upload:
                number = page.facts.number
                store.put_bytes(f"bench/render/{number}.png", page.image_png, "image/png")
        return pages / (time.perf_counter() - started), size

    def reference(size: tuple[int, int], grey: bool) -> tuple[float, tuple[int, int]]:
        with tempfile.TemporaryDirectory(dir=plan.workdir) as out:
            started = time.perf_counter()
            subprocess.run(
                [
                    pdftoppm,
                    "-png",
                    *(["-gray"] if grey else []),
                    "-scale-to-x",
                    str(size[0]),
                    "-scale-to-y",
                    str(size[1]),
                    str(pdf),
                    f"{out}/page",
                ],
                check=True,
            )
            rate = pages / (time.perf_counter() - started)
            from PIL import Image

            with Image.open(sorted(Path(out).glob("*.png"))[0]) as first:
                return rate, first.size

    _, size = service(upload=False)  # warm-up: imports, fonts, first-use paths
    # Like for like: where the service stored every page as one grey channel (pages
    # without colour), the reference writes grey PNGs too (`pdftoppm -gray`).
    all_grey = len(grey_pages) == pages
    render_rates, upload_rates, poppler_rates, poppler_rgb_rates = [], [], [], []
    poppler_size = size
    for index in range(plan.runs):
        render_rates.append(service(upload=False)[0])
        upload_rates.append(service(upload=True)[0])
        rate, poppler_size = reference(size, grey=all_grey)
        poppler_rates.append(rate)
        poppler_rgb_rates.append(reference(size, grey=False)[0] if all_grey else rate)
        log(
            f"  rendering run {index + 1}: render {render_rates[-1]:.1f}, render+upload "
            f"{upload_rates[-1]:.1f}, pdftoppm {poppler_rates[-1]:.1f} pages/s "
            f"(RGB {poppler_rgb_rates[-1]:.1f})"
        )
    ratios = [s / p for s, p in zip(upload_rates, poppler_rates, strict=True)]
    render_only = [s / p for s, p in zip(render_rates, poppler_rates, strict=True)]
    against_rgb = [s / p for s, p in zip(upload_rates, poppler_rgb_rates, strict=True)]
    reference_flags = "-png -gray" if all_grey else "-png"
    # What a page costs each side, rendering and encoding included (and, for the
    # service, its facts, which prepare makes of every page it renders).
    render_ms = [1000 / rate for rate in render_rates]
    render_upload_ms = [1000 / rate for rate in upload_rates]
    reference_ms = [1000 / rate for rate in poppler_rates]
    return {
        "rendering": {
            "title": "Rendering",
            "unit": "ratio of pages/s",
            "service": "worker.render.render_pages as for a page read by OCR (facts, PNG) "
            "+ the PNG to S3",
            "reference": f"pdftoppm {reference_flags} at the same pixel size "
            f"({tool_version([pdftoppm, '-v'])})",
            "service_grey_pages": len(grey_pages),
            "inputs": f"{pages} born-digital A4 pages at {dpi} dpi "
            f"({size[0]}x{size[1]} px; pdftoppm {poppler_size[0]}x{poppler_size[1]} px)",
            "ratio": summary(ratios),
            "ratio_render_only": summary(render_only),
            "ratio_against_rgb_reference": summary(against_rgb),
            "service_pages_per_s": summary(upload_rates),
            "service_render_only_pages_per_s": summary(render_rates),
            "reference_pages_per_s": summary(poppler_rates),
            "service_render_encode_ms_per_page": summary(render_ms),
            "service_render_encode_upload_ms_per_page": summary(render_upload_ms),
            "reference_render_encode_ms_per_page": summary(reference_ms),
            **verdict(median(ratios), 8.0),
        }
    }
