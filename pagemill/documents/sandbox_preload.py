"""Imported once by the sandbox's fork server, so children start with it loaded.

Opening and rendering need none of PyMuPDF's layout models, whose import (with
onnxruntime) costs a second and 150 MB, nor the pymupdf4llm converter PyMuPDF imports
when it can, which brings onnxruntime itself (25 MB of this server's memory, and 40 ms
to import). A None entry makes each import fail fast, which PyMuPDF treats as "not
installed"; no sandboxed child turns pages into Markdown (the text layer engine runs in
the worker). Nothing here may open an uploaded document: every child forked from this
process must start clean of them.
"""

from __future__ import annotations

import sys

sys.modules["pymupdf.layout"] = None  # type: ignore[assignment]
sys.modules["pymupdf4llm"] = None  # type: ignore[assignment]

import pymupdf  # noqa: E402
from PIL import Image  # noqa: E402, F401

import pagemill.documents.inspect  # noqa: E402, F401
from pagemill.documents.facts import ink_fraction, text_layer_facts  # noqa: E402


def _warm_up() -> None:
    """Measure a page made here, once, as children measure theirs: MuPDF sets up its
    built-in font, its text and drawing devices and its grey colour space on first use,
    and a child forked after that does not pay for it again (an inspection child of a
    25-page document took about 4 ms less CPU)."""
    with pymupdf.open() as made:
        page = made.new_page()
        page.insert_text((72, 72), "Invoice 2026-001: 1,085.00 EUR", fontsize=11)
        page.draw_rect(pymupdf.Rect(72, 90, 300, 120))
        made_bytes = made.tobytes()
    with pymupdf.open(stream=made_bytes, filetype="pdf") as document:
        page = document.load_page(0)
        text_layer_facts(page)
        ink_fraction(page)
        page.get_pixmap(dpi=36, alpha=False)


_warm_up()
