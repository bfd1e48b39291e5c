"""Scanned variants of born-digital PDFs, whose text layer is then exact ground truth.

Each born-digital PDF under a folder gives one image-only PDF per kind
(`name.KIND.pdf`, see `degrade.py`), its pages rendered in greyscale at the OCR engine's
resolution and degraded, and beside it `name.KIND.txt`, the source's text layer in
reading order. The source's invoice fields and reference table are copied as
`name.KIND.json` and `name.KIND.table.md` when the variant has every page of the source,
as they describe the whole document. The `two-column` and `receipt` kinds first lay the
source's text out anew (`layouts.py`) as one page, whose own text layer, column after
column, is then the reference.

Generation is reproducible: the random state of each page comes from the seed, the
document's path relative to the folder, the kind and the page number.
"""

from __future__ import annotations

import hashlib
import io
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pymupdf
from PIL import Image

from cli.evaluation.degrade import VARIANT_KINDS, degrade
from cli.evaluation.discovery import documents_under, find_ground_truth
from cli.evaluation.layouts import RELAYOUTS
from pagemill.engines.catalog import DEFAULT_OCR_ENGINE, TEXT_LAYER_ENGINE
from worker.engines.registry import render_dpi_for
from worker.engines.router import route_page
from worker.render import pdf_page_facts

OCR_ENGINE = DEFAULT_OCR_ENGINE


@dataclass(frozen=True)
class VariantSet:
    created: list[Path]  # the variant documents written
    notes: list[str]  # PDFs that gave no variants, and why


def make_variants(
    source_root: Path,
    out_root: Path,
    kinds: Iterable[str] = VARIANT_KINDS,
    max_pages: int = 2,
    seed: int = 0,
) -> VariantSet:
    """Variants of every born-digital PDF under `source_root`, written under `out_root`."""
    kinds = tuple(kinds)
    unknown = sorted(set(kinds) - set(VARIANT_KINDS))
    if unknown:
        raise ValueError(f"unknown variant kinds {unknown}; known: {', '.join(VARIANT_KINDS)}")
    created: list[Path] = []
    notes: list[str] = []
    for source in documents_under(source_root):
        if source.suffix.lower() != ".pdf":
            continue
        name = source.relative_to(source_root).as_posix()
        try:
            document = pymupdf.open(source)
        except (pymupdf.FileDataError, RuntimeError) as error:
            notes.append(f"{name}: no variants, the PDF cannot be opened ({error})")
            continue
        with document:
            page_count = min(max_pages, document.page_count)
            problem = not_born_digital(document, page_count)
            if problem is not None:
                notes.append(f"{name}: no variants, {problem}")
                continue
            target = out_root / Path(name).parent
            target.mkdir(parents=True, exist_ok=True)
            for kind in kinds:
                created.append(
                    _write_variant(document, page_count, kind, target, name, source, seed)
                )
    return VariantSet(created=created, notes=notes)


def not_born_digital(document: pymupdf.Document, page_count: int) -> str | None:
    """Why the first pages' text layer is not exact ground truth, or None when it is.

    The workers' router decides: every page must be one it would read from the text layer
    (enough text, mappable glyphs, not an invisible OCR layer over a scan).
    """
    if document.needs_pass:
        return "the PDF is encrypted"
    for index in range(page_count):
        page = document[index]
        route = route_page("auto", pdf_page_facts(page, page.number + 1), True, OCR_ENGINE)
        if route.engine != TEXT_LAYER_ENGINE:
            return f"page {page.number + 1}: {route.reason}"
    return None


def text_layer_reference(document: pymupdf.Document, page_count: int) -> str:
    """The text layer of the first pages, blocks sorted top to bottom, left to right.

    The sort is PyMuPDF's: it reads tables and invoices row by row as a person does, where
    the order of the content stream is whatever the producing program wrote.
    """
    pages = (document[index].get_text(sort=True).strip() for index in range(page_count))
    return "\n\n".join(pages) + "\n"


def _write_variant(
    document: pymupdf.Document,
    page_count: int,
    kind: str,
    target: Path,
    name: str,
    source: Path,
    seed: int,
) -> Path:
    stem = f"{source.stem}.{kind}"
    dpi = render_dpi_for(OCR_ENGINE)
    relayout = RELAYOUTS.get(kind)
    # A page laid out anew is its own reference, in its own order: its text layer as
    # written (column after column), one page; the source's fields and table describe
    # another layout and are not copied.
    pages = document if relayout is None else relayout(text_layer_reference(document, page_count))
    count = page_count if relayout is None else 1
    scanned = pymupdf.open()
    for index in range(count):
        pixmap = pages[index].get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY, alpha=False)
        image = Image.frombytes("L", (pixmap.width, pixmap.height), pixmap.samples)
        degraded = degrade(image, kind, _page_rng(seed, name, kind, index + 1))
        _append_image_page(scanned, degraded, dpi)
    path = target / f"{stem}.pdf"
    scanned.save(path, garbage=3, deflate=True, no_new_id=True)
    scanned.close()
    if relayout is not None:
        (target / f"{stem}.txt").write_text(pages[0].get_text().strip() + "\n")
        return path
    (target / f"{stem}.txt").write_text(text_layer_reference(document, page_count))
    if page_count == document.page_count:
        truth, _notes = find_ground_truth(source)
        if truth.invoice_fields is not None:
            shutil.copyfile(truth.invoice_fields, target / f"{stem}.json")
        if truth.table is not None:
            shutil.copyfile(truth.table, target / f"{stem}.table.md")
    return path


def _append_image_page(document: pymupdf.Document, image: Image.Image, dpi: int) -> None:
    # The page is the image's size at its resolution, so the workers render it back 1:1.
    width_pt, height_pt = image.width * 72 / dpi, image.height * 72 / dpi
    page = document.new_page(width=width_pt, height=height_pt)
    buffer = io.BytesIO()
    # Fastest compression: PyMuPDF compresses the image again when it stores it.
    image.save(buffer, format="PNG", compress_level=1)
    page.insert_image(page.rect, stream=buffer.getvalue())


def _page_rng(seed: int, name: str, kind: str, page_number: int) -> np.random.Generator:
    digest = hashlib.sha256(f"{seed}\0{name}\0{kind}\0{page_number}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))
