"""Sandboxed child that renders pages (see sandbox.run_sandboxed):
args SOURCE KIND DPI MAX_PIXELS OUT_DIR PAGES REQUESTED_ENGINE OCR_ENGINE.

Routes each page from its facts (worker.engines.router) and makes only what that
engine reads: `OUT_DIR/{n}.png` for an OCR page, `OUT_DIR/{n}.pdf` for a page read
from its text layer. Announces each page, with its route, as soon as it is written,
so the parent stores pages while later ones render.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pagemill.documents.facts import (
    BLOBS_FACT,
    DRAWN_PATHS_FACT,
    INK_FACT,
    SIDE_BY_SIDE_FACT,
    TEXT_LINES_FACT,
    WORDS_FACT,
)
from pagemill.documents.sandbox import emit
from pagemill.domain import SourceKind
from worker.engines.base import PageFacts
from worker.engines.router import TEXT_LAYER_ENGINE, Route, route_page
from worker.render import PageOutputs, render_pages


def run(args: list[str]) -> None:
    source, kind, dpi, max_pixels, out_dir, pages, requested, ocr_engine = args[:8]
    numbers = [int(number) for number in pages.split(",") if number]
    out = Path(out_dir)
    source_kind = SourceKind(kind)

    def route_of(facts: PageFacts) -> Route:
        # The same decision prepare records: pure, so making it twice agrees.
        return route_page(requested, facts, source_kind is SourceKind.pdf, ocr_engine)

    def outputs_for(facts: PageFacts) -> PageOutputs:
        from_text_layer = route_of(facts).engine == TEXT_LAYER_ENGINE
        return PageOutputs(image=not from_text_layer, pdf_page=from_text_layer)

    rendered = render_pages(
        Path(source), source_kind, numbers, int(dpi), int(max_pixels), outputs_for
    )
    for page in rendered:
        number = page.facts.number
        route = route_of(page.facts)
        image_path = pdf_path = None
        if page.image_png is not None:
            image_path = out / f"{number}.png"
            image_path.write_bytes(page.image_png)
        if page.pdf_page is not None:
            pdf_path = out / f"{number}.pdf"
            pdf_path.write_bytes(page.pdf_page)
        emit(
            {
                # Kept in pages.facts for the quote (pagemill.accounting.quote).
                "facts": {
                    **dataclasses.asdict(page.facts),
                    INK_FACT: page.ink_fraction,
                    BLOBS_FACT: page.ink_blobs,
                    TEXT_LINES_FACT: page.text_lines,
                    SIDE_BY_SIDE_FACT: page.side_by_side_share,
                    WORDS_FACT: page.words,
                    DRAWN_PATHS_FACT: page.drawn_paths,
                },
                "engine": route.engine,
                "engine_reason": route.reason,
                "image_path": str(image_path) if image_path else None,
                "pdf_path": str(pdf_path) if pdf_path else None,
                "image_dpi": page.image_dpi,
                "image_width_px": page.image_width_px,
                "image_height_px": page.image_height_px,
                "render_seconds": page.render_seconds,
            }
        )
