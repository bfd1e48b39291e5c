"""`pagemill engine-bench` on the tiny model: with and without speculation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gpu_tiny_model import NORMAL_PAGES, tiny_profile

from worker.engines.vllm.bench import engine_bench_command
from worker.engines.vllm.settings import VllmSettings

pytestmark = pytest.mark.timeout(300)

NGRAM = {
    "method": "ngram",
    "num_speculative_tokens": 3,
    "prompt_lookup_min": 2,
    "prompt_lookup_max": 3,
}


def test_bench_reports_both_modes(tiny_model: Any) -> None:
    lines: list[str] = []
    settings = VllmSettings(weights_path=tiny_model.path, max_model_len=512, task_time_limit_s=600)
    pages = len(NORMAL_PAGES)  # the non-looping pages: no retry engine needed
    results = engine_bench_command(
        [Path("unused")],
        pages=pages,
        concurrency=pages,
        settings=settings,
        model_profile=tiny_profile(NGRAM),  # type: ignore[arg-type]
        echo=lines.append,
    )
    speculative, plain = results
    assert (speculative.label, plain.label) == ("speculative", "plain")
    # Greedy: the same tokens either way; only the steps differ.
    assert speculative.output_tokens == plain.output_tokens
    assert speculative.retried_pages == plain.retried_pages == 0
    # Each page: two drafts of 3, five accepted (see test_gpu_vllm_engine).
    assert (
        speculative.spec.steps,
        speculative.spec.draft_tokens,
        speculative.spec.accepted_tokens,
    ) == (
        2 * pages,
        6 * pages,
        5 * pages,
    )
    assert speculative.spec.tokens_per_step == pytest.approx(3.5)
    assert plain.spec.draft_tokens == 0
    for result in results:
        assert result.pages_per_second > 0 and result.device_seconds_per_page > 0
        assert result.device_seconds == pytest.approx(result.busy_seconds)
    table = "\n".join(lines)
    print(table)
    for label in ("pages/s", "tokens/page", "tokens/s", "acceptance", "tokens/step", "GPU s/page"):
        assert label in table
    assert "83.3%" in table  # 5 of 6 drafted tokens accepted
