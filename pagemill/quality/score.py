"""A page's quality score and verdict from its check results, and the job's from its pages'.

The score combines checks the way jina-ocr-v1's training reward did: multiplied together,
so every failure counts, with a floor under each structure and format check so that one
broken table or formula does not erase an otherwise good page. Checks that say the text
itself is wrong have no floor: a decoding loop inflates or poisons everything else on the
page, an empty answer from a page with ink has nothing worth keeping, and neither has text
invented for a blank page.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import StrEnum

from pagemill.quality.checks import CheckName, CheckResult

# The least a failed check can leave of the page's score.
SCORE_FLOORS: dict[CheckName, float] = {
    CheckName.TABLES: 0.1,
    CheckName.LATEX: 0.2,
    # Cut off at the token cap: what came before the cut is usually sound.
    CheckName.TRUNCATION: 0.2,
    CheckName.REPETITION: 0.0,
    CheckName.EMPTY_OUTPUT: 0.0,
    CheckName.BLANK_INVENTED: 0.0,
}
# A check added later without a floor of its own is treated as a format check.
DEFAULT_SCORE_FLOOR = 0.2


class Verdict(StrEnum):
    OK = "ok"  # every check passed at the first attempt
    REPAIRED = "repaired"  # a check failed, and a repair attempt passed them all
    DEGRADED = "degraded"  # a check still fails: the page is returned as it is, flagged


# Worst first: a job is as bad as its worst page.
_VERDICT_ORDER = (Verdict.DEGRADED, Verdict.REPAIRED, Verdict.OK)


def page_score(results: Iterable[CheckResult]) -> float:
    """Product of the check scores, each raised to its floor; 1.0 when all passed."""
    score = 1.0
    for result in results:
        floor = SCORE_FLOORS.get(result.name, DEFAULT_SCORE_FLOOR)
        score *= max(floor, min(result.score, 1.0))
    return score


def all_passed(results: Iterable[CheckResult]) -> bool:
    return all(result.passed for result in results)


def failed_checks(results: Iterable[CheckResult]) -> list[CheckName]:
    """Names of the failed checks: what a repair policy picks its retry by."""
    return [result.name for result in results if not result.passed]


def verdict(before: Sequence[CheckResult], after: Sequence[CheckResult] | None = None) -> Verdict:
    """The page's verdict from its first attempt and, when one ran, its last repair."""
    if all_passed(before):
        return Verdict.OK
    if after is not None and all_passed(after):
        return Verdict.REPAIRED
    return Verdict.DEGRADED


def job_score(page_scores: Iterable[float]) -> float | None:
    """Mean page score; None for a job with no scored page rather than a made-up number."""
    scores = list(page_scores)
    return sum(scores) / len(scores) if scores else None


def job_verdict(page_verdicts: Iterable[Verdict]) -> Verdict:
    """The worst page's verdict: one degraded page makes a degraded job."""
    seen = set(page_verdicts)
    return next((v for v in _VERDICT_ORDER if v in seen), Verdict.OK)
