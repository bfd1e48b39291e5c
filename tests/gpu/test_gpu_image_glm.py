"""GLM-OCR's architecture reads page images on vLLM's CPU build, with MTP on.

A tiny GlmOcrForConditionalGeneration (tiny_glm_ocr.py) is loaded as a
deployment loads GLM-OCR: the `glm-ocr` profile (prompt, image preparation,
sampling, MTP speculation, output rules) with settings read from the
environment. Two pages rendered by the pipeline go through AsyncLLM at once;
vLLM's GLM-OCR processor turns each into image tokens, its vision tower
encodes them, and its glm_ocr_mtp draft proposes tokens that the target
verifies. The MTP layer here is the "noisy" kind, so acceptance is partial.
"""

from __future__ import annotations

from typing import Any

import pytest
from glm_runs import GlmRun, acceptance_sums, run_glm_ocr, sample_pages

from worker.engines.vllm.inputs import prepare_image
from worker.engines.vllm.postprocess import to_markdown
from worker.engines.vllm.profiles import GLM_OCR

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def pages() -> dict[str, Any]:
    return sample_pages()


@pytest.fixture(scope="module")
def run(tiny_glm_ocr: Any, pages: dict[str, Any]) -> GlmRun:
    return run_glm_ocr(tiny_glm_ocr.with_mtp("noisy").path, pages)


@pytest.fixture(scope="module")
def tokenizer(tiny_glm_ocr: Any) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_glm_ocr.path)


def glm_image_tokens(width: int, height: int) -> int:
    # One token per 28 x 28 px (14 px patches merged 2 x 2), each side rounded
    # to a multiple of 28; these pages are inside GLM-OCR's pixel limits.
    return round(width / 28) * round(height / 28)


def test_prompt_tokens_hold_the_image_tokens_of_each_page(
    run: GlmRun, pages: dict[str, Any], tokenizer: Any
) -> None:
    # The prompt's one <|image|> becomes one token per 28 x 28 px of the page.
    text_tokens = len(tokenizer(GLM_OCR.prompt).input_ids) - 1
    sizes = {
        name: prepare_image(page.require_image(), GLM_OCR.image).size
        for name, page in pages.items()
    }
    assert sizes == {"pdf": (1191, 1684), "png": (1240, 1755)}
    for name, result in run.results.items():
        assert result.prompt_tokens == text_tokens + glm_image_tokens(*sizes[name]), name
    # 1191 x 1684 px: 43 x 60 = 2,580 image tokens; 1240 x 1755 px: 44 x 63 = 2,772.
    assert run.results["pdf"].prompt_tokens - text_tokens == 2580
    assert run.results["png"].prompt_tokens - text_tokens == 2772


def test_output_is_the_greedy_answer_after_the_profiles_rules(
    run: GlmRun, tiny_glm_ocr: Any, tokenizer: Any
) -> None:
    # MTP only proposes; the target keeps its own greedy choice, so the text
    # is the planted answer whatever the draft said.
    answer = list(tiny_glm_ocr.answer_token_ids)
    raw = tokenizer.decode(answer[:-1], skip_special_tokens=False)
    expected, _meta = to_markdown(raw, GLM_OCR.output_format)
    assert expected == raw.strip()  # GLM-OCR answers in Markdown: only trimmed
    for result in run.results.values():
        assert result.finish_reason == "stop"
        assert result.output_tokens == len(answer)
        assert result.markdown == expected
        assert not result.details["repetition"]["retried"]


def test_every_page_measurement_is_filled_in(run: GlmRun) -> None:
    for name, result in run.results.items():
        details = result.details
        assert details["profile"] == "glm-ocr", name
        assert (details["licence"], details["commercial_use_permitted"]) == ("MIT", True)
        assert details["path"] == "speculative"
        assert result.device_kind == "cpu"
        [attempt] = details["attempts"]
        for stage in ("queue_seconds", "prefill_seconds", "decode_seconds"):
            assert details[stage] is not None and details[stage] >= 0, stage
        assert details["prefill_seconds"] > 0 and details["decode_seconds"] > 0
        assert attempt["gpu_ns"] > 0 and attempt["gpu_settled"]
        assert result.device_seconds == pytest.approx(attempt["gpu_seconds"])
        spec = details["spec"]
        assert spec["steps"] >= 1 and 0 < spec["draft_tokens"] == spec["steps"]  # K = 1
        assert sum(attempt["acceptance_histogram"]) == spec["steps"]
        assert spec["tokens_per_step"] == pytest.approx(1 + spec["accepted_tokens"] / spec["steps"])
    charged = sum(r.details["attempts"][0]["gpu_ns"] for r in run.results.values())
    assert charged == run.usage.charged_ns == run.usage.busy_ns


def test_per_page_acceptance_adds_up_to_the_engine_counters(run: GlmRun) -> None:
    steps, drafted, accepted = acceptance_sums(run)
    print(f"noisy MTP: {steps} steps, {accepted}/{drafted} accepted ({accepted / drafted:.1%})")
    assert (run.counters.drafts, run.counters.draft_tokens, run.counters.accepted_tokens) == (
        steps,
        drafted,
        accepted,
    )
    assert sum(run.counters.accepted_per_position) == accepted
    # The noisy draft is right part of the time: neither 0 nor 100 %.
    assert 0.1 < accepted / drafted < 0.9


def test_the_licence_gate_follows_the_profiles_licence() -> None:
    from worker.engines.base import EngineError
    from worker.engines.vllm.engine import VllmEngine
    from worker.engines.vllm.profiles import JINA_OCR_V1
    from worker.engines.vllm.settings import VllmSettings

    # GLM-OCR is MIT: it loads without accepting non-commercial terms, and
    # its pages may serve commercial jobs. Nothing starts until a page comes.
    engine = VllmEngine(GLM_OCR, VllmSettings())
    assert engine.profile.commercial_use_permitted
    engine.shutdown(drain_timeout_s=0)
    with pytest.raises(EngineError, match="forbids commercial use"):
        VllmEngine(JINA_OCR_V1, VllmSettings())
