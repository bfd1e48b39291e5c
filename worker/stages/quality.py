"""Every page's output is checked, scored and, when a check fails, repaired once.

Blank pages are found before any engine runs, so an engine is never asked to
invent text for an empty page. A page an OCR engine reads is turned upright first
(`worker.orientation`): OCR engines read upright lines, and a page scanned sideways
or upside down reads as noise. The turn is recorded with the page, in its engine
details and as an "orientation" entry among its quality checks. Repairs are chosen
per engine: a text layer that fails a check (above all, one that gave nothing for
a page with ink) is read by OCR instead, turned upright in the same way.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pagemill.accounting.seconds import orientation_seconds, repaired_seconds
from pagemill.quality.checks import CheckResult, run_checks
from pagemill.quality.score import page_score, verdict
from worker.engines.base import EngineResult, PageInput
from worker.engines.router import TEXT_LAYER_ENGINE
from worker.imaging import decode_gray, is_blank, rotate_png
from worker.orientation import Orientation, detect_orientation, from_text_layer

log = logging.getLogger(__name__)

Convert = Callable[[str, PageInput], EngineResult]


@dataclass(frozen=True)
class Assessed:
    engine: str
    result: EngineResult
    blank: bool | None
    checks: list[CheckResult]
    score: float
    verdict: str
    repair: str | None
    orientation: Orientation | None = None  # found before OCR; None when no OCR ran

    def columns(self) -> dict[str, Any]:
        checks = [check.to_dict() for check in self.checks]
        if self.orientation is not None:
            checks.append(_orientation_entry(self.orientation))
        return {
            "blank": self.blank,
            "quality_checks": checks,
            "quality_score": self.score,
            "verdict": self.verdict,
            "repair": self.repair,
        }


def convert_checked(engine: str, page: PageInput, convert: Convert, ocr_engine: str) -> Assessed:
    if engine == TEXT_LAYER_ENGINE:
        return _text_layer_checked(page, convert, ocr_engine)
    gray: np.ndarray | None = None
    if page.image_png is None:
        blank: bool | None = None
    elif _draws_text(page):
        blank = False
    else:
        # Decoded once: the blank check and orientation detection read the same grey levels.
        gray = decode_gray(page.image_png)
        blank = is_blank(gray)
    if blank:
        result = EngineResult(markdown="", device_seconds=0.0, finish_reason="stop")
        result.details["blank"] = "no engine ran: the page has no ink"
        checks = _check(result, blank)
        return Assessed(engine, result, blank, checks, page_score(checks), verdict(checks), None)
    result, orientation = _read(engine, page, gray, convert)
    checks = _check(result, blank)
    return Assessed(
        engine, result, blank, checks, page_score(checks), verdict(checks), None, orientation
    )


def _text_layer_checked(page: PageInput, convert: Convert, ocr_engine: str) -> Assessed:
    """The text layer's reading, checked; read by OCR instead when a check fails.

    Prepare does not render pages it routes to the text layer. Their pixels are needed
    only to tell whether the page is blank, and a page with visible text on it is not;
    otherwise, and for the repair, the page is rendered here from its one-page PDF.
    """
    result = convert(TEXT_LAYER_ENGINE, page)
    gray: np.ndarray | None = None
    if page.fallback is not None:
        # A page too heavy for layout analysis is too heavy to render: its plain text is
        # checked as it is, with no blank check and no repair.
        checks = _check(result, None)
        return Assessed(
            TEXT_LAYER_ENGINE, result, None, checks, page_score(checks), verdict(checks), None
        )
    if page.image_png is None and _has_visible_text(page) and result.markdown.strip():
        blank: bool | None = False
    else:
        page, gray = _with_pixels(page)
        blank = is_blank(gray) if gray is not None else None
    first = _check(result, blank)
    if all(check.passed for check in first):
        return Assessed(
            TEXT_LAYER_ENGINE, result, blank, first, page_score(first), verdict(first), None
        )
    if gray is None:
        page, gray = _with_pixels(page)
    if gray is None:
        return Assessed(
            TEXT_LAYER_ENGINE, result, blank, first, page_score(first), verdict(first), None
        )
    repair = "read by OCR instead of the text layer"
    second_result, second_orientation = _read(ocr_engine, page, gray, convert)
    second = _check(second_result, blank)
    outcome = verdict(first, second)
    if outcome == "repaired" or page_score(second) > page_score(first):
        charged = dataclasses.replace(
            second_result,
            device_seconds=repaired_seconds(result.device_seconds, second_result.device_seconds),
        )
        return Assessed(
            ocr_engine,
            charged,
            blank,
            second,
            page_score(second),
            outcome,
            repair,
            second_orientation,
        )
    # The repair did no better: keep the first answer, flagged, but pay for both.
    kept = dataclasses.replace(
        result,
        device_seconds=repaired_seconds(result.device_seconds, second_result.device_seconds),
    )
    return Assessed(TEXT_LAYER_ENGINE, kept, blank, first, page_score(first), "degraded", repair)


def _has_visible_text(page: PageInput) -> bool:
    # Text drawn on the page is ink; invisible text (a scanner's OCR layer) is not.
    return page.facts.text_chars - page.facts.invisible_text_chars > 0


# A page whose text layer draws at least this many characters is not blank, and its
# image need not be decoded to tell (decoding a 150 dpi page is most of an OCR task's own
# CPU). Forty characters of 6 pt text ink about a thousand pixels at 150 dpi, five times
# what `worker.imaging.is_blank` lets a blank page hold; a page drawing less (a lone page
# number) is still looked at, as the pixel check may find it blank.
DRAWN_TEXT_MIN_CHARS = 40


def _draws_text(page: PageInput) -> bool:
    return page.facts.text_chars - page.facts.invisible_text_chars >= DRAWN_TEXT_MIN_CHARS


def _with_pixels(page: PageInput) -> tuple[PageInput, np.ndarray | None]:
    """The page with its image (rendered from the one-page PDF when prepare made none)
    and that image's grey levels; None when there is nothing to render from."""
    if page.image_png is None and page.pdf_page is not None:
        # Imported here: PyMuPDF (with its layout models) doubles the memory of a worker
        # process, and prepare/finalize workers, which import this module, never render.
        from worker.render import render_pdf_page_png

        page = dataclasses.replace(
            page, image_png=render_pdf_page_png(page.pdf_page, page.image_dpi)
        )
    if page.image_png is None:
        return page, None
    return page, decode_gray(page.image_png)


def _read(
    engine: str, page: PageInput, gray: np.ndarray | None, convert: Convert
) -> tuple[EngineResult, Orientation | None]:
    """The engine's reading of the page; an engine that reads pixels gets them upright."""
    if engine == TEXT_LAYER_ENGINE or page.image_png is None:
        return convert(engine, page), None
    # A born-digital page's text layer says which way up it is drawn; pixels otherwise
    # (decoded here when the blank check did not need them).
    orientation = from_text_layer(page.facts) or detect_orientation(
        gray if gray is not None else page.image_png
    )
    if orientation.rotation:
        log.info("page %s turned %s degrees before OCR", page.facts.number, orientation.rotation)
        upright = rotate_png(page.require_image(), orientation.rotation)
        page = dataclasses.replace(page, image_png=upright)
    result = convert(engine, page)
    extra_seconds = orientation_seconds(orientation.cpu_seconds, result.device_kind)
    recorded = dataclasses.replace(
        result,
        device_seconds=result.device_seconds + extra_seconds,
        details={**result.details, "orientation": orientation.as_dict()},
    )
    return recorded, orientation


def _orientation_entry(orientation: Orientation) -> dict[str, Any]:
    # Shaped like a check so it lists with them in the page row and manifest.json; it never
    # fails: a page that could not be told is read as it lies, and the detail says so.
    return {
        "name": "orientation",
        "passed": True,
        "score": 1.0,
        "detail": orientation.describe(),
        "rotation": orientation.rotation,
    }


def _check(result: EngineResult, blank: bool | None) -> list[CheckResult]:
    return run_checks(
        result.markdown,
        finish_reason=result.finish_reason,
        output_tokens=result.output_tokens,
        page_is_blank=blank,
    )
