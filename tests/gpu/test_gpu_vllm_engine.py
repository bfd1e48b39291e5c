"""Real vLLM (the CPU build) through the production adapter and bridge.

The tiny planted model (gpu_tiny_model.py) stands in for an OCR model: a text
prompt instead of a page image, everything else as in production. Greedy fp32
decoding is deterministic, and the planted chains say exactly what every page
must produce, so outputs and, for ngram, acceptance counts are asserted
exactly; for the noisy draft model, the sums are.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from gpu_doubles import scan_page
from gpu_tiny_model import LOOP_PAGE, MAX_TOKENS, NORMAL_PAGES, PROMPT, tiny_profile

from worker.engines.base import EngineResult
from worker.engines.vllm.engine import VllmEngine
from worker.engines.vllm.measurements import SpecCounters
from worker.engines.vllm.settings import VllmSettings
from worker.engines.vllm.timeshare import Usage

pytestmark = pytest.mark.timeout(300)

NGRAM = {
    "method": "ngram",
    "num_speculative_tokens": 3,
    "prompt_lookup_min": 2,
    "prompt_lookup_max": 3,
}


@dataclass
class Run:
    kind: str
    results: dict[int, EngineResult]
    counters: SpecCounters
    usage: Usage
    wall_ns: int
    tokenizer: Any


@pytest.fixture(scope="module", params=["ngram", "draft_model"])
def run(request: pytest.FixtureRequest, tiny_model: Any) -> Iterator[Run]:
    """Every page at once from its own thread, as Celery's threads pool would."""
    import time

    from transformers import AutoTokenizer

    if request.param == "ngram":
        spec_config: dict[str, object] = NGRAM
    else:
        draft = request.getfixturevalue("noisy_draft")
        spec_config = {"method": "draft_model", "model": str(draft), "num_speculative_tokens": 3}
    settings = VllmSettings(
        weights_path=tiny_model.path,
        max_num_seqs=16,
        guard_max_num_seqs=4,
        max_model_len=512,
        page_timeout_s=120,
        task_time_limit_s=600,
        settle_timeout_s=5,
    )
    engine = VllmEngine(tiny_profile(spec_config), settings)  # type: ignore[arg-type]
    engine.start()
    before = engine.spec_counters()
    numbers = [*NORMAL_PAGES, LOOP_PAGE]
    started = time.monotonic_ns()
    with ThreadPoolExecutor(max_workers=len(numbers)) as pool:
        results = dict(zip(numbers, pool.map(engine.convert, map(scan_page, numbers)), strict=True))
    wall_ns = time.monotonic_ns() - started
    counters = engine.spec_counters() - before
    usage = engine.usage()
    engine.shutdown(drain_timeout_s=5)
    yield Run(
        request.param,
        results,
        counters,
        usage,
        wall_ns,
        AutoTokenizer.from_pretrained(tiny_model.path),
    )


def test_pages_come_out_as_greedy_decoding_would(run: Run, tiny_model: Any) -> None:
    # Speculation must not change the text: verification keeps only what the
    # target model would have chosen itself, whatever the draft proposed.
    for number in NORMAL_PAGES:
        result = run.results[number]
        expected = tiny_model.expected_token_ids[PROMPT.format(page_number=number)]
        assert expected[-1] == tiny_model.eos_token_id
        assert result.finish_reason == "stop"
        assert result.output_tokens == len(expected)
        assert result.markdown == run.tokenizer.decode(expected[:-1]).strip()
        assert result.details["path"] == "speculative"
        assert not result.details["repetition"]["retried"]


def test_every_page_records_tokens_timings_and_acceptance(run: Run) -> None:
    for number, result in run.results.items():
        prompt_ids = run.tokenizer(PROMPT.format(page_number=number)).input_ids
        first = result.details["attempts"][0]
        assert first["prompt_tokens"] == len(prompt_ids)
        assert result.prompt_tokens == len(prompt_ids)
        for stage in ("queue_seconds", "prefill_seconds", "decode_seconds"):
            assert first[stage] is not None and first[stage] >= 0, stage
        assert first["decode_seconds"] > 0
        assert first["gpu_ns"] > 0 and first["gpu_settled"]
        spec = first["spec"]
        assert spec["steps"] >= 1
        assert 0 <= spec["accepted_tokens"] <= spec["draft_tokens"] <= 3 * spec["steps"]
        histogram = first["acceptance_histogram"]
        assert sum(histogram) == spec["steps"]
        assert sum(j * n for j, n in enumerate(histogram)) == spec["accepted_tokens"]


def test_per_page_acceptance_adds_up_to_the_engine_counters(run: Run) -> None:
    spec_attempts = [
        a["spec"]
        for r in run.results.values()
        for a in r.details["attempts"]
        if a["spec"] is not None
    ]
    assert len(spec_attempts) == len(run.results)  # the guarded retry does not speculate
    steps = sum(s["steps"] for s in spec_attempts)
    drafted = sum(s["draft_tokens"] for s in spec_attempts)
    accepted = sum(s["accepted_tokens"] for s in spec_attempts)
    print(
        f"{run.kind}: {steps} steps, {drafted} drafted, {accepted} accepted "
        f"({accepted / drafted:.1%}), {1 + accepted / steps:.2f} tokens/step"
    )
    assert (run.counters.drafts, run.counters.draft_tokens, run.counters.accepted_tokens) == (
        steps,
        drafted,
        accepted,
    )
    assert sum(run.counters.accepted_per_position) == accepted
    if run.kind == "ngram":
        # Prompt lookup finds the prompt's first tokens in every page's chain:
        # two drafts of 3, the first fully accepted, the second up to where
        # the chain leaves the prompt. The loop is predicted perfectly.
        for number in NORMAL_PAGES:
            spec = run.results[number].details["spec"]
            assert (spec["steps"], spec["draft_tokens"], spec["accepted_tokens"]) == (2, 6, 5)
        loop = run.results[LOOP_PAGE].details["spec"]
        assert (loop["steps"], loop["draft_tokens"], loop["accepted_tokens"]) == (11, 33, 33)
    else:
        # The noisy draft agrees with the target only part of the time.
        assert 0.2 < accepted / drafted < 0.95


def test_gpu_seconds_add_up_to_busy_time(run: Run) -> None:
    charges = sum(a["gpu_ns"] for r in run.results.values() for a in r.details["attempts"])
    assert run.usage.abandoned_ns == 0
    assert charges == run.usage.charged_ns == run.usage.busy_ns
    assert 0 < run.usage.busy_ns <= run.wall_ns
    assert run.usage.idle_ns >= 0
    for result in run.results.values():
        assert result.device_seconds == pytest.approx(
            sum(a["gpu_seconds"] for a in result.details["attempts"])
        )


def test_looping_page_takes_the_guarded_retry(run: Run) -> None:
    result = run.results[LOOP_PAGE]
    repetition = result.details["repetition"]
    assert repetition["looping"] and repetition["retried"]
    assert repetition["reasons"] == ["length", "repeated_ngram"]
    first, retry = result.details["attempts"]
    assert (first["path"], first["finish_reason"], first["output_tokens"]) == (
        "speculative",
        "length",
        MAX_TOKENS,
    )
    assert retry["path"] == "guarded" and retry["spec"] is None
    assert result.details["path"] == "guarded"
    assert result.finish_reason == retry["finish_reason"] == repetition["retry_finish_reason"]
    # The guard bans any repeated 3-gram: proof it ran on the retry.
    assert repetition["retry"]["max_ngram_repeats"] <= 1
    assert result.output_tokens == retry["output_tokens"] > 0
    assert result.device_seconds > first["gpu_seconds"]
