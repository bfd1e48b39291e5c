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
    with contextlib.redirect_stdout(io.StringIO()):
        import pymupdf4llm

        chunks = pymupdf4llm.to_markdown(document, page_chunks=True, **options)
    return "\n\n".join(str(chunk["text"]).strip() for chunk in chunks).strip()
