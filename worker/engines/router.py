"""The `auto` engine: text layer where the page has a trustworthy one, OCR otherwise.

The rule is pagemill.routing, where submit reads it too, to quote each page at the
engine it will most likely be routed to.
"""

from __future__ import annotations

from pagemill.routing import (
    MAX_INVISIBLE_SHARE,
    MAX_UNREADABLE_SHARE,
    MIN_TEXT_CHARS,
    OCR_ENGINES,
    SCAN_IMAGE_COVERAGE,
    SCAN_MAX_TEXT_CHARS,
    TEXT_LAYER_ENGINE,
    Route,
    route_page,
)

__all__ = [
    "MAX_INVISIBLE_SHARE",
    "MAX_UNREADABLE_SHARE",
    "MIN_TEXT_CHARS",
    "OCR_ENGINES",
    "SCAN_IMAGE_COVERAGE",
    "SCAN_MAX_TEXT_CHARS",
    "TEXT_LAYER_ENGINE",
    "Route",
    "route_page",
]
