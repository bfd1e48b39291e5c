"""Assembling a job's pages into one document, with no servers.

Both finalize and `pagemill convert` call this, so a document converted on a laptop
is put together exactly as in production.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pagemill.quality.furniture import FurnitureMode, split_pages


def page_marker(number: int) -> str:
    # An HTML comment: invisible when rendered, easy to split on for callers who need pages.
    return f"<!-- page {number} -->"


@dataclass(frozen=True)
class AssembledDocument:
    markdown: str
    # Each page's running headers, footers and page numbers, as manifest.json lists
    # them (pagemill.quality.furniture); only pages that have Markdown.
    furniture: dict[int, list[dict[str, Any]]]


def assemble_document(
    pages: list[tuple[int, str | None]], furniture: FurnitureMode = FurnitureMode.separate
) -> AssembledDocument:
    """Join page Markdown in page order, each page introduced by its marker, with the
    pages' furniture kept, moved out or dropped as the job asked.

    A page without Markdown (it failed) keeps its marker and says so, so callers
    never mistake a gap for an empty page.
    """
    parts = []
    found = {}
    for split in split_pages(pages, furniture):
        if split.body is None:
            body = "<!-- page failed: no output -->"
        else:
            body = split.body.strip()
            found[split.number] = [item.to_dict() for item in split.furniture]
        parts.append(f"{page_marker(split.number)}\n\n{body}".rstrip())
    return AssembledDocument(markdown="\n\n".join(parts) + "\n", furniture=found)
