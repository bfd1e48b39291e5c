"""`pagemill convert`: the whole pipeline in this process, with no servers.

It runs the same prepare (render + route), engine and assembly code as the
workers; only the record keeping differs (files on disk instead of Postgres and S3).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pagemill.documents.inspect import inspect_document
from pagemill.documents.pagerange import parse_page_selection
from worker.engines.base import PageInput
from worker.engines.registry import render_dpi_for
from worker.pipeline import assemble_document, convert_page
from worker.render import render_pages

OCR_ENGINE = "rapidocr"
# Pixel budget for one page, as the workers' default.
MAX_RENDER_PIXELS = 40_000_000


@dataclass(frozen=True)
class ConvertedPage:
    number: int
    engine: str
    engine_reason: str
    wall_seconds: float
    compute_seconds: float
    output_chars: int


@dataclass(frozen=True)
class ConvertedDocument:
    name: str
    directory: Path
    pages: list[ConvertedPage]


def convert_file(
    source: Path,
    out_dir: Path,
    pages: str | None = None,
    engine: str = "auto",
    on_page: Callable[[ConvertedPage], None] | None = None,
    on_page_count: Callable[[int], None] | None = None,
) -> ConvertedDocument:
    info = inspect_document(source)
    numbers = parse_page_selection(pages, info.page_count)
    if on_page_count is not None:
        on_page_count(len(numbers))
    target = out_dir / source.stem
    pages_dir = target / "pages"
    if pages_dir.exists():
        shutil.rmtree(pages_dir)
    pages_dir.mkdir(parents=True)
    converted: list[ConvertedPage] = []
    manifest_pages: list[dict[str, Any]] = []
    markdown_by_page: list[tuple[int, str | None]] = []
    dpi = render_dpi_for(OCR_ENGINE)
    for rendered in render_pages(source, info.kind, numbers, dpi, MAX_RENDER_PIXELS):
        page_input = PageInput(
            facts=rendered.facts,
            image_png=rendered.image_png,
            image_dpi=rendered.image_dpi,
            pdf_page=rendered.pdf_page,
        )
        outcome = convert_page(engine, page_input, OCR_ENGINE)
        number = rendered.facts.number
        (pages_dir / f"{number}.md").write_text(outcome.result.markdown + "\n")
        (pages_dir / f"{number}.png").write_bytes(rendered.image_png)
        markdown_by_page.append((number, outcome.result.markdown))
        page = ConvertedPage(
            number=number,
            engine=outcome.route.engine,
            engine_reason=outcome.route.reason,
            wall_seconds=outcome.wall_seconds,
            compute_seconds=outcome.result.compute_seconds,
            output_chars=len(outcome.result.markdown),
        )
        converted.append(page)
        manifest_pages.append(
            {
                **dataclasses.asdict(page),
                "status": "succeeded",
                "image": {
                    "width_px": rendered.image_width_px,
                    "height_px": rendered.image_height_px,
                    "dpi": rendered.image_dpi,
                },
                "facts": dataclasses.asdict(rendered.facts),
            }
        )
        if on_page is not None:
            on_page(page)
    (target / "document.md").write_text(assemble_document(markdown_by_page))
    manifest = {
        "source": {"filename": source.name, "kind": info.kind.value, "pages": info.page_count},
        "engine": engine,
        "pages": manifest_pages,
    }
    (target / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return ConvertedDocument(name=source.stem, directory=target, pages=converted)
