"""Page selections like "1-3,7" (1-based, inclusive, in document order)."""

from __future__ import annotations

import re

# ASCII digits only: int() would also read other scripts' digits, which a
# selection has no need of.
_PART = re.compile(r"\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?", re.ASCII)
# The width of jobs.page_selection, where the selection is kept as given.
MAX_SELECTION_CHARS = 200
# No document has a page number longer than this, and a longer one would reach
# Python's limit on converting digits to an int.
_MAX_PAGE_DIGITS = 7


class PageRangeError(ValueError):
    """The selection is malformed or points outside the document."""


def parse_page_selection(selection: str | None, page_count: int) -> list[int]:
    """Return the sorted, de-duplicated 1-based page numbers a selection names."""
    if selection is None or not selection.strip():
        return list(range(1, page_count + 1))
    numbers: set[int] = set()
    for first, last, _ in _ranges(selection):
        if last > page_count:
            raise PageRangeError(
                f"Page {last} is outside the document, which has {page_count} "
                f"page{'s' if page_count != 1 else ''}."
            )
        numbers.update(range(first, last + 1))
    return sorted(numbers)


def selection_includes(selection: str | None, page_count: int, number: int) -> bool:
    """Whether a stored, valid selection names page `number` of the document."""
    if not 1 <= number <= page_count:
        return False
    if selection is None or not selection.strip():
        return True
    return any(first <= number <= last for first, last, _ in _ranges(selection))


def canonical_page_selection(selection: str | None) -> str | None:
    """The same pages written one way ("2,1" and " 1 - 2" are "1-2"), without knowing
    the document; None for every page. Raises PageRangeError as parsing does."""
    if selection is None or not selection.strip():
        return None
    merged: list[list[int]] = []
    for first, last, _ in sorted(_ranges(selection)):
        if merged and first <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in merged)


def _ranges(selection: str) -> list[tuple[int, int, str]]:
    if len(selection) > MAX_SELECTION_CHARS:
        raise PageRangeError(
            f"The page selection is {len(selection)} characters long; the limit is "
            f"{MAX_SELECTION_CHARS}. Use ranges, like 1-40."
        )
    ranges = []
    for part in selection.split(","):
        match = _PART.fullmatch(part)
        if match is None:
            raise PageRangeError(
                f"The page selection '{_shown(part)}' is not a page or a range; "
                "use a form like 1-3,7."
            )
        digits = [group for group in match.groups() if group is not None]
        if any(len(group.lstrip("0")) > _MAX_PAGE_DIGITS for group in digits):
            raise PageRangeError(f"The page number in '{_shown(part)}' is far too large.")
        first = int(digits[0])
        last = int(digits[-1])
        if first < 1 or last < first:
            raise PageRangeError(f"The page range '{_shown(part)}' is not valid; pages start at 1.")
        ranges.append((first, last, part))
    return ranges


def _shown(part: str) -> str:
    part = part.strip()
    return part if len(part) <= 30 else part[:30] + "..."
