"""Sandboxed child that renders pages (see sandbox.run_sandboxed):
args SOURCE KIND DPI MAX_PIXELS OUT_DIR PAGES.

Writes `OUT_DIR/{n}.png` (and `{n}.pdf` for PDFs) and announces each page as soon
as it is written, so the parent stores pages while later ones render.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pagemill.documents.sandbox import emit
from pagemill.domain import SourceKind
from worker.render import render_pages


def run(args: list[str]) -> None:
    source, kind, dpi, max_pixels, out_dir, pages = args[:6]
    numbers = [int(number) for number in pages.split(",") if number]
    out = Path(out_dir)
    for page in render_pages(Path(source), SourceKind(kind), numbers, int(dpi), int(max_pixels)):
        number = page.facts.number
        image_path = out / f"{number}.png"
        image_path.write_bytes(page.image_png)
        pdf_path = None
        if page.pdf_page is not None:
            pdf_path = out / f"{number}.pdf"
            pdf_path.write_bytes(page.pdf_page)
        emit(
            {
                "facts": dataclasses.asdict(page.facts),
                "image_path": str(image_path),
                "pdf_path": str(pdf_path) if pdf_path else None,
                "image_dpi": page.image_dpi,
                "image_width_px": page.image_width_px,
                "image_height_px": page.image_height_px,
                "render_seconds": page.render_seconds,
            }
        )
