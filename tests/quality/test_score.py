"""The page score's floors and product, verdicts, and the job-level summaries."""

from __future__ import annotations

import pytest

from pagemill.quality.checks import CheckName, CheckResult, run_checks
from pagemill.quality.score import (
    SCORE_FLOORS,
    Verdict,
    failed_checks,
    job_score,
    job_verdict,
    page_score,
    verdict,
)


def passed(name: CheckName) -> CheckResult:
    return CheckResult(name=name, passed=True, score=1.0, detail="")


def failed(name: CheckName, score: float) -> CheckResult:
    return CheckResult(name=name, passed=False, score=score, detail="")


ALL_PASSED = [passed(name) for name in CheckName]


def test_a_page_that_passes_everything_scores_one() -> None:
    assert page_score(ALL_PASSED) == 1.0
    assert page_score([]) == 1.0


def test_floors_are_those_of_the_training_reward() -> None:
    assert SCORE_FLOORS[CheckName.TABLES] == 0.1
    assert SCORE_FLOORS[CheckName.LATEX] == 0.2
    assert SCORE_FLOORS[CheckName.TRUNCATION] == 0.2
    assert SCORE_FLOORS[CheckName.REPETITION] == 0.0
    assert set(SCORE_FLOORS) == set(CheckName)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (CheckName.TABLES, 0.1),
        (CheckName.LATEX, 0.2),
        (CheckName.TRUNCATION, 0.2),
        (CheckName.REPETITION, 0.0),
        (CheckName.EMPTY_OUTPUT, 0.0),
        (CheckName.BLANK_INVENTED, 0.0),
    ],
)
def test_a_check_failed_outright_leaves_its_floor(name: CheckName, expected: float) -> None:
    others = [passed(other) for other in CheckName if other != name]
    assert page_score([failed(name, 0.0), *others]) == pytest.approx(expected)


def test_a_score_above_its_floor_is_kept() -> None:
    assert page_score([failed(CheckName.TABLES, 0.5)]) == pytest.approx(0.5)
    assert page_score([failed(CheckName.LATEX, 0.05)]) == pytest.approx(0.2)


def test_scores_multiply() -> None:
    results = [
        failed(CheckName.TABLES, 0.5),  # kept: 0.5
        failed(CheckName.LATEX, 0.1),  # floored: 0.2
        failed(CheckName.REPETITION, 0.3),  # no floor: 0.3
        passed(CheckName.TRUNCATION),
    ]
    assert page_score(results) == pytest.approx(0.5 * 0.2 * 0.3)


def test_a_loop_on_a_page_with_good_tables_still_sinks_the_page() -> None:
    markdown = "| a | b |\n|---|---|\n| 1 | 2 |\n\n" + "Thank you for your order. " * 100
    results = run_checks(markdown, finish_reason="length", page_is_blank=False)
    assert failed_checks(results) == [CheckName.REPETITION, CheckName.TRUNCATION]
    # Repetition has no floor: the loop share drives the page score towards zero.
    assert page_score(results) < 0.01


def test_verdicts() -> None:
    broken = [failed(CheckName.TABLES, 0.0), passed(CheckName.LATEX)]
    assert verdict(ALL_PASSED) is Verdict.OK
    assert verdict(ALL_PASSED, broken) is Verdict.OK  # nothing needed repairing
    assert verdict(broken) is Verdict.DEGRADED  # no repair was attempted
    assert verdict(broken, ALL_PASSED) is Verdict.REPAIRED
    assert verdict(broken, broken) is Verdict.DEGRADED
    assert [str(v) for v in Verdict] == ["ok", "repaired", "degraded"]


def test_job_score_is_the_mean_page_score() -> None:
    assert job_score([1.0, 0.5, 0.0]) == pytest.approx(0.5)
    assert job_score(iter([0.25])) == pytest.approx(0.25)
    assert job_score([]) is None


def test_job_verdict_is_the_worst_page() -> None:
    assert job_verdict([Verdict.OK, Verdict.OK]) is Verdict.OK
    assert job_verdict([Verdict.OK, Verdict.REPAIRED]) is Verdict.REPAIRED
    assert job_verdict([Verdict.REPAIRED, Verdict.DEGRADED, Verdict.OK]) is Verdict.DEGRADED
    assert job_verdict([]) is Verdict.OK
