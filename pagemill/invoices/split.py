"""Where one invoice ends and the next begins in a file that holds several.

A page starts a new invoice when its page counter restarts ("Page 1 of 3" after
other pages) or when it names an invoice number other than the current invoice's.
A page that names none continues the invoice before it.
"""

from __future__ import annotations

from pagemill.invoices.fields import read_fields
from pagemill.invoices.labels import find_hits
from pagemill.invoices.layout import Segment
from pagemill.invoices.lexicon import PAGE_COUNTER
from pagemill.invoices.values import DateOrder, normalise_id


def split_pages(segments_by_page: dict[int, list[Segment]]) -> list[list[int]]:
    groups: list[list[int]] = []
    current_number: str | None = None
    for page in sorted(segments_by_page):
        segments = segments_by_page[page]
        number = _invoice_number(segments)
        counter = _page_counter(segments)
        restarts = counter is not None and counter == 1
        renamed = number is not None and current_number is not None and number != current_number
        if not groups or restarts or renamed:
            groups.append([page])
            current_number = number
        else:
            groups[-1].append(page)
            current_number = current_number or number
    return groups


def _invoice_number(segments: list[Segment]) -> str | None:
    hits = [hit for hit in find_hits(segments) if hit.label.field == "invoice_number"]
    values, _ = read_fields(hits, segments, DateOrder.UNKNOWN)
    found = values.get("invoice_number")
    return normalise_id(found.value) if found is not None else None


def _page_counter(segments: list[Segment]) -> int | None:
    for segment in segments:
        match = PAGE_COUNTER.search(segment.text)
        if match is not None and int(match.group(1)) <= int(match.group(2)):
            return int(match.group(1))
    return None
