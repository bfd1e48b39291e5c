"""The vLLM engine's pure parts: loop detection, the n-gram guard, prompts,
output clean-up, profiles and the settings that refuse to start."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from gpu_doubles import scan_page
from pydantic import ValidationError

from worker.engines.base import EngineError, PageInput
from worker.engines.vllm.engine import VllmEngine
from worker.engines.vllm.inputs import build_prompt
from worker.engines.vllm.ngram_guard import banned_next_tokens
from worker.engines.vllm.postprocess import to_markdown
from worker.engines.vllm.profiles import PROFILES, RepetitionSpec, get_profile
from worker.engines.vllm.repetition import detect_loop, max_ngram_repeats
from worker.engines.vllm.settings import VllmSettings


def page(number: int = 1, image: bytes = b"") -> PageInput:
    return scan_page(number, image, dpi=144)


def test_repeated_ngrams_are_counted_with_overlaps() -> None:
    assert max_ngram_repeats([1, 2, 3, 1, 2, 3, 1, 2, 3], 3) == 3
    assert max_ngram_repeats([1, 2, 3, 4, 5], 2) == 1
    assert max_ngram_repeats([7, 7, 7, 7], 2) == 3
    assert max_ngram_repeats([1, 2], 3) == 0
    # Table cell tags repeat in every real table: n-grams of them do not count.
    assert max_ngram_repeats([9, 9, 9, 9, 9], 2, frozenset({9})) == 0


def test_loops_and_truncation_are_detected() -> None:
    spec = RepetitionSpec(detect_ngram_size=3, detect_min_repeats=3)
    fine = detect_loop([1, 2, 3, 4, 5, 6], "stop", spec)
    assert not fine.looping and fine.reasons == ()
    cut = detect_loop([1, 2, 3, 4, 5, 6], "length", spec)
    assert cut.looping and cut.reasons == ("length",)
    looped = detect_loop([5, 6, 7] * 4, "stop", spec)
    assert looped.looping and looped.reasons == ("repeated_ngram",)
    assert looped.max_ngram_repeats == 4


def test_ngram_guard_bans_the_token_that_would_repeat_an_ngram() -> None:
    none: frozenset[int] = frozenset()
    # ... 1 2 3 ... 1 2 -> 3 would repeat "1 2 3"
    assert banned_next_tokens([1, 2, 3, 4, 1, 2], 3, 90, none) == {3}
    assert banned_next_tokens([1, 2, 3, 4, 1, 2], 3, 90, frozenset({3})) == set()
    # Outside the window it is allowed again.
    assert banned_next_tokens([1, 2, 3, 4, 5, 6, 7, 1, 2], 3, 4, none) == set()
    assert banned_next_tokens([1, 2], 3, 90, none) == set()
    assert banned_next_tokens([4, 5, 4], 1, 90, none) == {4, 5}


def test_text_profiles_prompt_with_the_page_number() -> None:
    profile = get_profile("olmocr-2")
    text_profile = type(profile)(
        **{**profile.__dict__, "input_kind": "text", "prompt": "p{page_number}"}
    )
    assert build_prompt(text_profile, page(12)) == {"prompt": "p12"}


def test_image_profiles_send_the_page_image_downscaled_as_the_model_wants() -> None:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("L", (1700, 2200), color=200).save(buffer, format="PNG")
    prompt = build_prompt(get_profile("olmocr-2"), page(1, buffer.getvalue()))
    image = prompt["multi_modal_data"]["image"]
    assert image.mode == "RGB"
    assert max(image.size) == 1288 and image.size[0] == round(1700 * 1288 / 2200)
    assert "<|image_pad|>" in prompt["prompt"]
    deepseek = build_prompt(get_profile("deepseek-ocr"), page(1, buffer.getvalue()))
    assert deepseek["multi_modal_data"]["image"].size == (1700, 2200)
    assert deepseek["prompt"].startswith("<image>\n")


def test_model_outputs_become_markdown() -> None:
    grounded = "<|ref|>title<|/ref|><|det|>[[10, 20, 300, 40]]<|/det|>\n# Invoice\n\nTotal: 12"
    assert to_markdown(grounded, "deepseek_grounding") == (
        "# Invoice\n\nTotal: 12",
        {"grounding": [{"kind": "title", "boxes": [[10, 20, 300, 40]]}]},
    )
    olm = "---\nprimary_language: en\nrotation_correction: 0\n---\nHello *world*\n"
    assert to_markdown(olm, "yaml_front_matter") == (
        "Hello *world*",
        {"primary_language": "en", "rotation_correction": "0"},
    )
    assert to_markdown("  plain  ", "markdown") == ("plain", {})


def test_profiles_state_their_licence_and_speculation() -> None:
    jina = PROFILES["jina-ocr-v1"]
    assert (jina.licence, jina.commercial_use_permitted) == ("CC-BY-NC-4.0", False)
    assert jina.speculative_config == {"method": "mtp", "num_speculative_tokens": 3}
    deepseek = PROFILES["deepseek-ocr"]
    assert (deepseek.licence, deepseek.commercial_use_permitted) == ("MIT", True)
    assert deepseek.repetition.guard_extra_args() == {
        "ngram_size": 30,
        "window_size": 90,
        "whitelist_token_ids": [128821, 128822],
    }
    assert deepseek.repetition.guard_logits_processor is not None
    assert deepseek.repetition.guard_logits_processor.endswith(":NGramPerReqLogitsProcessor")
    olm = PROFILES["olmocr-2"]
    assert (olm.licence, olm.commercial_use_permitted) == ("Apache-2.0", True)
    assert jina.with_speculative_tokens(1).speculative_config == {
        "method": "mtp",
        "num_speculative_tokens": 1,
    }
    with pytest.raises(ValueError, match="unknown model profile"):
        get_profile("nope")


def test_settings_refuse_a_task_limit_at_or_above_the_visibility_timeout() -> None:
    with pytest.raises(ValidationError, match="visibility"):
        VllmSettings(task_time_limit_s=3600, broker_visibility_timeout_s=3600)
    with pytest.raises(ValidationError, match="page attempts"):
        VllmSettings(page_timeout_s=300, task_time_limit_s=600)
    with pytest.raises(ValidationError, match="guard_gpu_memory_utilization"):
        VllmSettings(gpu_memory_utilization=0.8, guard_gpu_memory_utilization=0.3)
    # Without speculation there is no second engine to make room for.
    VllmSettings(
        gpu_memory_utilization=0.9, guard_gpu_memory_utilization=0.3, enable_speculation=False
    )


def test_settings_read_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAGEMILL_VLLM_PROFILE", "deepseek-ocr")
    monkeypatch.setenv("PAGEMILL_VLLM_WEIGHTS_DIR", "/srv/weights")
    monkeypatch.setenv("PAGEMILL_VLLM_MAX_NUM_SEQS", "48")
    settings = VllmSettings()
    assert (settings.profile, settings.max_num_seqs) == ("deepseek-ocr", 48)
    assert settings.resolve_weights("DeepSeek-OCR") == Path("/srv/weights/DeepSeek-OCR")


def test_a_noncommercial_model_needs_explicit_acceptance(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match=r"CC-BY-NC-4\.0"):
        VllmEngine(get_profile("jina-ocr-v1"), VllmSettings(weights_dir=tmp_path))
    engine = VllmEngine(
        get_profile("jina-ocr-v1"),
        VllmSettings(weights_dir=tmp_path, noncommercial_use_accepted=True),
    )
    assert engine.render_dpi == 144
    engine.shutdown()


def test_missing_weights_fail_before_any_download(tmp_path: Path) -> None:
    engine = VllmEngine(get_profile("deepseek-ocr"), VllmSettings(weights_dir=tmp_path))
    with pytest.raises(EngineError, match="weights not found"):
        engine.start()
    engine.shutdown()


def test_eager_mode_is_a_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from worker.engines.vllm.factory import engine_kwargs

    profile = get_profile("olmocr-2")
    default, _ = engine_kwargs(profile, VllmSettings(weights_path=tmp_path), guard_engine=False)
    assert "enforce_eager" not in default  # vLLM's default: CUDA graphs and compilation
    monkeypatch.setenv("PAGEMILL_VLLM_ENFORCE_EAGER", "true")
    for guard_engine in (False, True):
        eager, _ = engine_kwargs(
            profile, VllmSettings(weights_path=tmp_path), guard_engine=guard_engine
        )
        assert eager["enforce_eager"] is True
