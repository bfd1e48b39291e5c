"""The `auto` engine's rule: text layer where the page has a trustworthy one, OCR
otherwise.

Pure: it decides from facts about a page, so prepare routes each page by it
(worker.engines.router) and submit quotes each page by the same rule
(pagemill.accounting.quote).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

# The engine that reads the PDF's text layer and never the pixels, and those that read
# pixels (a job may ask for one by name).
from pagemill.engines.catalog import OCR_ENGINES, TEXT_LAYER_ENGINE

# Fewer characters than this is a page number or a stray label, not a text layer
# that carries the page; such pages are usually scans.
MIN_TEXT_CHARS = 25
# Above this share of unmappable glyphs (U+FFFD), the text layer is mojibake.
MAX_UNREADABLE_SHARE = 0.05
# More than this share of invisible text is a scanner's OCR layer; we read the scan ourselves.
MAX_INVISIBLE_SHARE = 0.5
# A page this covered by raster images with this little text is a scan with a stamp on it.
SCAN_IMAGE_COVERAGE = 0.85
SCAN_MAX_TEXT_CHARS = 200


class RoutingFacts(Protocol):
    """What the rule reads about a page's text layer (worker.engines.base.PageFacts,
    pagemill.documents.facts.TextLayerFacts)."""

    @property
    def text_chars(self) -> int: ...
    @property
    def unreadable_chars(self) -> int: ...
    @property
    def invisible_text_chars(self) -> int: ...
    @property
    def image_coverage(self) -> float: ...


@dataclass(frozen=True)
class Route:
    engine: str
    reason: str


def route_page(requested: str, facts: RoutingFacts, has_pdf_page: bool, ocr_engine: str) -> Route:
    """Pick the engine for one page and say why, in words an operator can act on."""
    if requested in OCR_ENGINES:
        return Route(requested, "requested by the job")
    if not has_pdf_page:
        return Route(ocr_engine, "the page is an image, so it has no text layer")
    if requested == TEXT_LAYER_ENGINE:
        return Route(TEXT_LAYER_ENGINE, "requested by the job")
    return _route_auto(facts, ocr_engine)


def _route_auto(facts: RoutingFacts, ocr_engine: str) -> Route:
    chars = facts.text_chars
    if chars < MIN_TEXT_CHARS:
        return Route(ocr_engine, f"no usable text layer ({chars} characters)")
    if facts.unreadable_chars / chars > MAX_UNREADABLE_SHARE:
        share = facts.unreadable_chars / chars
        return Route(ocr_engine, f"text layer is {share:.0%} unmappable glyphs")
    if facts.invisible_text_chars / chars > MAX_INVISIBLE_SHARE:
        return Route(ocr_engine, "text layer is an invisible OCR layer over a scan")
    if facts.image_coverage >= SCAN_IMAGE_COVERAGE and chars < SCAN_MAX_TEXT_CHARS:
        return Route(
            ocr_engine,
            f"page is {facts.image_coverage:.0%} raster image with only {chars} characters of text",
        )
    return Route(TEXT_LAYER_ENGINE, f"trustworthy text layer ({chars} characters)")
