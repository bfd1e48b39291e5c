"""The one small interface every engine implements.

Engines know nothing of Celery, the database or S3: a page image and the facts
about the page go in, Markdown and what it cost to make come out. That keeps
them testable on their own and lets `pagemill convert` run them with no servers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pagemill.documents.blocks import PageBlocks

# Declared with the engines that read at it; here for those engines' modules.
from pagemill.engines.catalog import CPU_ENGINE_RENDER_DPI as CPU_ENGINE_RENDER_DPI


@dataclass(frozen=True)
class PageFacts:
    """What prepare learned about a page before any engine ran."""

    number: int  # 1-based page number in the source document
    width_pt: float
    height_pt: float
    text_chars: int  # characters in the PDF text layer (0 for images)
    unreadable_chars: int  # U+FFFD and other glyphs the text layer could not map
    invisible_text_chars: int  # render mode 3 text: an OCR layer laid over a scan
    image_coverage: float  # share of the page area covered by raster images, 0..1
    rotation: int = 0  # the page's /Rotate, degrees
    # Clockwise turn, in degrees, that sets the visible text layer's lines upright in the
    # rendered page; None when the layer cannot tell (too little text, lines running
    # several ways, or a page mostly raster image whose pixels may lie otherwise).
    text_upright_turn: int | None = None
    # Bytes of drawing instructions in the page's content stream, decompressed: what layout
    # analysis has to work through. None for images and for pages prepared before it was kept.
    content_bytes: int | None = None

    @classmethod
    def image_only(cls, number: int, width_pt: float, height_pt: float) -> PageFacts:
        """Facts of a page that is a picture: no text layer, all raster image."""
        return cls(
            number=number,
            width_pt=width_pt,
            height_pt=height_pt,
            text_chars=0,
            unreadable_chars=0,
            invisible_text_chars=0,
            image_coverage=1.0,
        )

    @classmethod
    def from_stored(cls, stored: dict[str, Any]) -> PageFacts:
        """Facts as a page row keeps them; fields a later release added are left out, so
        a worker still on this release can read pages a newer prepare recorded."""
        known = {field.name for field in dataclasses.fields(cls)}
        return cls(**{name: value for name, value in stored.items() if name in known})


@dataclass(frozen=True)
class PageInput:
    """Everything an engine may look at for one page."""

    facts: PageFacts
    # Rendered at the engine's resolution; None for a page read from its text layer, which
    # prepare does not render (`require_image` gives an OCR engine a clear error instead).
    image_png: bytes | None
    image_dpi: int
    pdf_page: bytes | None = None  # the page alone as a one-page PDF (None for image uploads)
    # Why this page gets the engine's cheapest reading (plain text for a text layer, with no
    # layout analysis and no rendering); None for the usual reading. See worker.stages.budget.
    fallback: str | None = None

    def require_image(self) -> bytes:
        if self.image_png is None:
            raise EngineError(f"Page {self.facts.number} has no page image to read.")
        return self.image_png


@dataclass
class EngineResult:
    """An engine's answer for one page, with what it measured about itself."""

    markdown: str
    device_seconds: float  # device seconds attributed to this page
    device_kind: str = "cpu"
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None  # "stop", "length", ... where the engine has one
    details: dict[str, Any] = field(default_factory=dict)  # engine-specific measurements
    # What the page says and where (pagemill.documents.blocks); None when the engine has
    # no boxes for its text (a VLM profile that emits no grounding).
    blocks: PageBlocks | None = None


@runtime_checkable
class Engine(Protocol):
    """A page-to-Markdown converter.

    `render_dpi` is the resolution the engine wants its page image at; prepare
    renders once, at that resolution, so no engine resamples.
    """

    name: str
    render_dpi: int

    def convert(self, page: PageInput) -> EngineResult: ...


class EngineError(Exception):
    """An engine failed on a page; the message is safe to show to the caller."""
