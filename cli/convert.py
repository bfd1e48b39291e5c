"""`pagemill convert`: the whole pipeline in this process, with no servers.

It runs the same prepare (render + route), engine and assembly code as the
workers; only the record keeping differs (files on disk instead of Postgres and S3).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pagemill.documents.blocks import PageBlocks
from pagemill.documents.inspect import inspect_document
from pagemill.documents.pagerange import parse_page_selection
from pagemill.engines.catalog import DEFAULT_OCR_ENGINE
from pagemill.invoices import extract_invoices
from pagemill.quality.furniture import FurnitureMode
from worker.engines.base import EngineResult, PageInput
from worker.engines.registry import get_engine, render_dpi_for
from worker.engines.router import route_page
from worker.pipeline import assemble_document
from worker.render import render_pages
from worker.stages.blocks import page_blocks
from worker.stages.quality import convert_checked

OCR_ENGINE = DEFAULT_OCR_ENGINE
# Pixel budget for one page, as the workers' default.
MAX_RENDER_PIXELS = 40_000_000


@dataclass(frozen=True)
class ConvertedPage:
    number: int
    engine: str
    engine_reason: str
    wall_seconds: float
    device_seconds: float
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
    furniture: FurnitureMode = FurnitureMode.separate,
    on_page: Callable[[ConvertedPage], None] | None = None,
    on_page_count: Callable[[int], None] | None = None,
    extract: str | None = None,
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
    blocks_by_page: list[PageBlocks] = []
    dpi = render_dpi_for(OCR_ENGINE)
    for rendered in render_pages(source, info.kind, numbers, dpi, MAX_RENDER_PIXELS):
        page_input = PageInput(
            facts=rendered.facts,
            image_png=rendered.image_png,
            image_dpi=rendered.image_dpi,
            pdf_page=rendered.pdf_page,
        )
        route = route_page(engine, rendered.facts, rendered.pdf_page is not None, OCR_ENGINE)
        started = time.perf_counter()
        assessed = convert_checked(route.engine, page_input, _convert, OCR_ENGINE)
        markdown = assessed.result.markdown
        number = rendered.facts.number
        (pages_dir / f"{number}.md").write_text(markdown + "\n")
        blocks = page_blocks(assessed, rendered.facts)
        if blocks is not None:
            (pages_dir / f"{number}.json").write_text(blocks.model_dump_json(exclude_none=True))
        if rendered.image_png is not None:
            (pages_dir / f"{number}.png").write_bytes(rendered.image_png)
        markdown_by_page.append((number, markdown))
        if extract is not None and blocks is not None:
            blocks_by_page.append(blocks)
        page = ConvertedPage(
            number=number,
            engine=assessed.engine,
            engine_reason=route.reason,
            wall_seconds=time.perf_counter() - started,
            device_seconds=assessed.result.device_seconds,
            output_chars=len(markdown),
        )
        converted.append(page)
        manifest_pages.append(
            {
                **dataclasses.asdict(page),
                # The old name of device_seconds, as the API keeps it, for one release.
                "compute_seconds": page.device_seconds,
                "status": "succeeded",
                "image": {
                    "width_px": rendered.image_width_px,
                    "height_px": rendered.image_height_px,
                    "dpi": rendered.image_dpi,
                },
                "facts": dataclasses.asdict(rendered.facts),
                "quality": assessed.columns(),
            }
        )
        if on_page is not None:
            on_page(page)
    document = assemble_document(markdown_by_page, furniture)
    (target / "document.md").write_text(document.markdown)
    for entry in manifest_pages:
        entry["furniture"] = document.furniture.get(entry["number"])
    manifest = {
        "source": {"filename": source.name, "kind": info.kind.value, "pages": info.page_count},
        "engine": engine,
        "furniture": furniture.value,
        "pages": manifest_pages,
    }
    (target / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    if extract == "invoice":
        invoices = extract_invoices(blocks_by_page)
        (target / "invoice.json").write_text(invoices.model_dump_json(indent=2) + "\n")
    return ConvertedDocument(name=source.stem, directory=target, pages=converted)


def _convert(engine_name: str, page: PageInput) -> EngineResult:
    return get_engine(engine_name).convert(page)
