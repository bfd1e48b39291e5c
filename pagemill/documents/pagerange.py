"""Page selections like "1-3,7" (1-based, inclusive, in document order)."""

from __future__ import annotations

import re

_PART = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


class PageRangeError(ValueError):
    """The selection is malformed or points outside the document."""


def parse_page_selection(selection: str | None, page_count: int) -> list[int]:
    """Return the sorted, de-duplicated 1-based page numbers a selection names."""
    if selection is None or not selection.strip():
        return list(range(1, page_count + 1))
    numbers: set[int] = set()
    for part in selection.split(","):
        match = _PART.match(part)
        if match is None:
            raise PageRangeError(
                f"The page selection '{part.strip()}' is not a page or a range; "
                "use a form like 1-3,7."
            )
        first = int(match.group(1))
        last = int(match.group(2) or first)
        if first < 1 or last < first:
            raise PageRangeError(f"The page range '{part.strip()}' is not valid; pages start at 1.")
        if last > page_count:
            raise PageRangeError(
                f"Page {last} is outside the document, which has {page_count} "
                f"page{'s' if page_count != 1 else ''}."
            )
        numbers.update(range(first, last + 1))
    return sorted(numbers)
