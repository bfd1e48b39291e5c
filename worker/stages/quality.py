"""Every page's output is checked, scored and, when a check fails, repaired once.

Blank pages are found before any engine runs, so an engine is never asked to
invent text for an empty page. Repairs are chosen per engine: a text layer that
gave nothing for a page with ink is read by OCR instead; OCR output that fails a
check is tried again on the page turned upright (a sideways scan reads as noise).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pagemill.quality.checks import CheckResult, run_checks
from pagemill.quality.score import page_score, verdict
from worker.engines.base import EngineResult, PageInput
from worker.imaging import detect_rotation, is_blank, rotate_png

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

    def columns(self) -> dict[str, Any]:
        return {
            "blank": self.blank,
            "quality_checks": [check.to_dict() for check in self.checks],
            "quality_score": self.score,
            "verdict": self.verdict,
            "repair": self.repair,
        }


def convert_checked(engine: str, page: PageInput, convert: Convert, ocr_engine: str) -> Assessed:
    blank = is_blank(page.image_png) if page.image_png else None
    if blank and engine != "textlayer":
        result = EngineResult(markdown="", compute_seconds=0.0, finish_reason="stop")
        result.details["blank"] = "no engine ran: the page has no ink"
        checks = _check(result, blank)
        return Assessed(engine, result, blank, checks, page_score(checks), verdict(checks), None)
    result = convert(engine, page)
    first = _check(result, blank)
    repaired = _repair(engine, page, result, first, blank, convert, ocr_engine)
    if repaired is None:
        return Assessed(engine, result, blank, first, page_score(first), verdict(first), None)
    repair, repaired_engine, second_result = repaired
    second = _check(second_result, blank)
    outcome = verdict(first, second)
    if outcome == "repaired" or page_score(second) > page_score(first):
        charged = dataclasses.replace(
            second_result,
            compute_seconds=second_result.compute_seconds + result.compute_seconds,
        )
        return Assessed(
            repaired_engine, charged, blank, second, page_score(second), outcome, repair
        )
    # The repair did no better: keep the first answer, flagged, but pay for both.
    kept = dataclasses.replace(
        result, compute_seconds=result.compute_seconds + second_result.compute_seconds
    )
    return Assessed(engine, kept, blank, first, page_score(first), "degraded", repair)


def _check(result: EngineResult, blank: bool | None) -> list[CheckResult]:
    return run_checks(
        result.markdown,
        finish_reason=result.finish_reason,
        output_tokens=result.output_tokens,
        page_is_blank=blank,
    )


def _repair(
    engine: str,
    page: PageInput,
    result: EngineResult,
    checks: list[CheckResult],
    blank: bool | None,
    convert: Convert,
    ocr_engine: str,
) -> tuple[str, str, EngineResult] | None:
    if all(check.passed for check in checks):
        return None
    if engine == "textlayer":
        if not page.image_png:
            return None
        return "read by OCR instead of the text layer", ocr_engine, convert(ocr_engine, page)
    if not page.image_png:
        return None
    turn = detect_rotation(page.image_png)
    if turn == 0:
        return None
    upright = dataclasses.replace(page, image_png=rotate_png(page.image_png, turn))
    log.info("page %s turned %s degrees for a second reading", page.facts.number, turn)
    return f"turned {turn} degrees and read again", engine, convert(engine, upright)
