"""MTP speculation for real: GLM-OCR's own draft layer through vLLM's glm_ocr_mtp.

The same tiny GLM-OCR target with two MTP layers (tiny_glm_ocr.py): one
rigged to predict what the target says next, one left random as an untrained
draft is. Each reads a rendered page through the `glm-ocr` profile; a third
run switches speculation off. The text must be the same three times (the
target verifies every drafted token and keeps only its own greedy choice),
the acceptance is what the draft deserves, and every page's acceptance adds
up to the engine's own counters.
"""

from __future__ import annotations

from typing import Any

import pytest
from glm_runs import GlmRun, acceptance_sums, run_glm_ocr, sample_pages

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def page() -> dict[str, Any]:
    return {"pdf": sample_pages()["pdf"]}


@pytest.fixture(scope="module")
def runs(tiny_glm_ocr: Any, page: dict[str, Any]) -> dict[str, GlmRun]:
    follow = tiny_glm_ocr.with_mtp("follow").path
    return {
        "follow": run_glm_ocr(follow, page),
        "random": run_glm_ocr(tiny_glm_ocr.with_mtp("random").path, page),
        "plain": run_glm_ocr(follow, page, speculation=False),
    }


def _check_counters(run: GlmRun) -> tuple[int, int, int]:
    steps, drafted, accepted = acceptance_sums(run)
    assert (run.counters.drafts, run.counters.draft_tokens, run.counters.accepted_tokens) == (
        steps,
        drafted,
        accepted,
    )
    assert sum(run.counters.accepted_per_position) == accepted
    return steps, drafted, accepted


def test_a_draft_that_follows_the_target_is_nearly_always_accepted(
    runs: dict[str, GlmRun],
) -> None:
    run = runs["follow"]
    steps, drafted, accepted = _check_counters(run)
    [result] = run.results.values()
    print(f"follow: {steps} steps, {accepted}/{drafted} accepted, {result.output_tokens} tokens")
    assert result.details["path"] == "speculative"
    assert accepted / drafted >= 0.95
    # K = 1: two tokens a step when the draft is right, so about half the
    # steps of plain decoding.
    assert steps <= 0.55 * result.output_tokens
    assert result.details["spec"]["tokens_per_step"] >= 1.95


def test_an_untrained_draft_is_almost_never_accepted(runs: dict[str, GlmRun]) -> None:
    run = runs["random"]
    steps, drafted, accepted = _check_counters(run)
    [result] = run.results.values()
    print(f"random: {steps} steps, {accepted}/{drafted} accepted")
    assert drafted > 0 and accepted / drafted <= 0.05
    # Nothing accepted: one token a step, as without speculation (the last
    # token needs no draft).
    assert steps >= result.output_tokens - 1 - accepted


def test_speculation_does_not_change_the_text(runs: dict[str, GlmRun], tiny_glm_ocr: Any) -> None:
    texts = {name: next(iter(run.results.values())).markdown for name, run in runs.items()}
    assert texts["follow"] == texts["random"] == texts["plain"]
    plain = next(iter(runs["plain"].results.values()))
    assert not runs["plain"].speculative
    assert plain.details["path"] == "guarded"  # without MTP the n-gram guard runs
    assert plain.details["spec"] is None
    for run in runs.values():
        [result] = run.results.values()
        assert result.output_tokens == len(tiny_glm_ocr.answer_token_ids)
        assert result.finish_reason == "stop"
