"""pymupdf4llm, called quietly.

pymupdf4llm (inside PyMuPDF 2.x) turns a page into Markdown with its layout
model: reading order, headings, tables. It prints progress to stdout, which in a
worker would interleave with task logs, so its output is captured here.
"""

from __future__ import annotations

import contextlib
import io
import logging
from typing import Any

import pymupdf

# PyMuPDF's own notices ("=== Document parser messages ===" and such) go to the
# logging system at debug level instead of the worker's stdout.
pymupdf.set_messages(pylogging=True, pylogging_name="pymupdf", pylogging_level=logging.DEBUG)


def page_to_markdown(document: pymupdf.Document, **options: Any) -> str:
    return chunks_markdown(page_chunks(document, **options))


def page_chunks(document: pymupdf.Document, **options: Any) -> list[dict[str, Any]]:
    """pymupdf4llm's reading a page at a time: each page's Markdown (`text`) and its layout
    regions (`page_boxes`, with their classes and boxes on the page as shown).

    pymupdf4llm takes each page's /Rotate off the document it reads (it reads the page as
    shown): read a copy when the document's pages are wanted as drawn afterwards."""
    with contextlib.redirect_stdout(io.StringIO()):
        import pymupdf4llm

        chunks = pymupdf4llm.to_markdown(document, page_chunks=True, **options)
    return list(chunks)


def chunks_markdown(chunks: list[dict[str, Any]]) -> str:
    return "\n\n".join(str(chunk["text"]).strip() for chunk in chunks).strip()
