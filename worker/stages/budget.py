"""When a page gets its engine's cheapest reading instead of the usual one.

Layout analysis of a text layer works through every drawing instruction and renders
the page for its layout model: a page of two million vector lines takes minutes,
mostly inside single C calls that no soft time limit can interrupt. Two measurements
decide, so that such a page is read cheaply before it fails: what prepare measured
(the page facts, against a budget in the settings), and what an earlier attempt took
(it was stopped at the time limit). A text layer is then read as plain text; an
OCR engine reads the page image shrunk to `ocr_fallback_max_pixels`.
"""

from __future__ import annotations

import io
import math
from typing import Any

from PIL import Image

from pagemill.domain import human_size
from pagemill.settings import Settings
from worker.engines.base import PageFacts
from worker.engines.router import TEXT_LAYER_ENGINE

# Key in a page's engine_details: how many of its attempts were stopped at the time limit.
TIME_LIMITED = "time_limit_exceeded"


def time_limit_message(settings: Settings) -> str:
    return f"exceeded the {settings.task_time_limit_s} s time limit"


def fallback_reason(
    settings: Settings, engine: str, facts: PageFacts, engine_details: dict[str, Any]
) -> str | None:
    if engine_details.get(TIME_LIMITED):
        return f"an earlier attempt {time_limit_message(settings)}"
    if engine != TEXT_LAYER_ENGINE:
        return None
    content_budget = settings.textlayer_max_content_bytes
    if facts.content_bytes is not None and facts.content_bytes > content_budget:
        return (
            f"{human_size(facts.content_bytes)} of drawing instructions, above the "
            f"{human_size(content_budget)} budget for layout analysis"
        )
    if facts.text_chars > settings.textlayer_max_text_chars:
        return (
            f"{facts.text_chars:,} characters, above the "
            f"{settings.textlayer_max_text_chars:,} budget for layout analysis"
        )
    return None


def shrunk_image(png: bytes, dpi: int, max_pixels: int) -> tuple[bytes, int]:
    """The page image within `max_pixels`, and its resolution: OCR time grows with the
    pixels, and text stays readable down to about 150 dpi."""
    with Image.open(io.BytesIO(png)) as image:
        pixels = image.width * image.height
        if pixels <= max_pixels:
            return png, dpi
        scale = math.sqrt(max_pixels / pixels)
        size = (max(1, int(image.width * scale)), max(1, int(image.height * scale)))
        smaller = image.resize(size, Image.Resampling.LANCZOS)
        out = io.BytesIO()
        smaller.save(out, format="PNG")
    return out.getvalue(), max(1, int(dpi * scale))
