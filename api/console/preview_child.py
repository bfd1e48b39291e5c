"""Sandboxed child (see pagemill.documents.sandbox): args PAGE_PDF DPI OUT_PNG.

The image of a page that prepare did not render, because its text layer was read
instead: the one-page PDF prepare stored for it, drawn for the console. It runs in a
limited child like every other opening of a client's document in the API.
"""

from __future__ import annotations

from pathlib import Path

import pymupdf

from pagemill.documents.sandbox import emit


def run(args: list[str]) -> None:
    pdf_path, dpi, out_path = args[:3]
    with pymupdf.open(pdf_path, filetype="pdf") as document:
        pixmap = document.load_page(0).get_pixmap(dpi=int(dpi), alpha=False)
        Path(out_path).write_bytes(pixmap.tobytes("png"))
    emit({"written": out_path})
