"""DeepSeek-OCR's architecture (deepseek-ocr and jina-ocr-v1) reads a page image
on vLLM's CPU build.

The tiny folder (tiny_deepseek_ocr.py) runs with vLLM's dummy loader, as that
module explains: real processor, image tokens, full-size vision encoders,
projector and a tiny MoE language model, random weights. Each profile is used
as a deployment uses it (prompt, image preparation, sampling, repetition
guard, output rules; settings from the environment) except for
`load_format="dummy"` added to its engine arguments.

The full-size encoders cost seconds a view on two cores, so each profile reads
one page, rendered small enough for the global view alone (both sides at most
640 px: no tiles). With random weights the model never says end-of-sentence;
PAGEMILL_VLLM_MAX_MODEL_LEN caps each page at a few dozen tokens.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from tiny_deepseek_ocr import build_tiny_deepseek_ocr

from pagemill.domain import SourceKind
from worker.engines.base import EngineResult, PageInput
from worker.engines.vllm.engine import VllmEngine
from worker.engines.vllm.postprocess import to_markdown
from worker.engines.vllm.profiles import DEEPSEEK_OCR, JINA_OCR_V1, ModelProfile
from worker.engines.vllm.repetition import detect_loop
from worker.engines.vllm.runner import Attempt
from worker.engines.vllm.settings import VllmSettings
from worker.render import render_pages

pytestmark = pytest.mark.timeout(600)

# 54 dpi: an A4 page is 447 x 632 px, inside one 640 px view.
PAGE_DPI = 54
MAX_MODEL_LEN = 320
# vLLM's DeepSeek-OCR processor: the 1024 px global view is 16 x 16 tokens
# after SAM's 16 px patches and the 4 x downsampling, one newline token per
# row and one view separator: 16 x 17 + 1.
GLOBAL_VIEW_TOKENS = 273

# What DeepSeek-OCR writes in grounding mode (from its model card's examples).
GROUNDED = (
    "<|ref|>title<|/ref|><|det|>[[112, 64, 530, 98]]<|/det|>\n# Invoice 2041\n\n"
    "<|ref|>text<|/ref|><|det|>[[112, 130, 880, 170], [112, 172, 600, 190]]<|/det|>\n"
    "Total due: 412 EUR\n\n"
    "<|ref|>image<|/ref|><|det|>[[700, 40, 880, 120]]<|/det|>\n"
    "<\uff5cend\u2581of\u2581sentence\uff5c>"
)


@dataclass
class Run:
    engine: VllmEngine
    page: PageInput
    result: EngineResult
    attempts: list[Attempt]
    tokenizer: Any


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_deepseek_ocr(tmp_path_factory.mktemp("tiny-deepseek-ocr"))


def dummy_weights(profile: ModelProfile) -> ModelProfile:
    return dataclasses.replace(
        profile, engine_kwargs={**profile.engine_kwargs, "load_format": "dummy"}
    )


def run_profile(profile: ModelProfile, weights: Path, **env: str) -> Run:
    from transformers import AutoTokenizer

    [rendered] = render_pages(
        REPO / "samples" / "scanned-sentence.pdf", SourceKind.pdf, [1], PAGE_DPI, 40_000_000
    )
    assert rendered.image_png is not None
    assert max(rendered.image_width_px or 0, rendered.image_height_px or 0) <= 640
    page = PageInput(rendered.facts, rendered.image_png, rendered.image_dpi)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {
            "PAGEMILL_VLLM_PROFILE": profile.name,
            "PAGEMILL_VLLM_WEIGHTS_PATH": str(weights),
            "PAGEMILL_VLLM_ENFORCE_EAGER": "true",
            "PAGEMILL_VLLM_MAX_MODEL_LEN": str(MAX_MODEL_LEN),
            "PAGEMILL_VLLM_MAX_NUM_SEQS": "2",
            **env,
        }.items():
            patch.setenv(name, value)
        settings = VllmSettings()
    engine = VllmEngine(dummy_weights(profile), settings)
    attempts: list[Attempt] = []
    attempt = engine._attempt

    def recorded(prompt: dict[str, Any], request_id: str, *, guarded: bool) -> Attempt:
        attempts.append(attempt(prompt, request_id, guarded=guarded))
        return attempts[-1]

    engine._attempt = recorded  # type: ignore[method-assign]
    try:
        result = engine.convert(page)
    finally:
        engine.shutdown(drain_timeout_s=5)
    return Run(engine, page, result, attempts, AutoTokenizer.from_pretrained(weights))


@pytest.fixture(scope="module")
def deepseek(weights: Path) -> Iterator[Run]:
    yield run_profile(DEEPSEEK_OCR, weights)


@pytest.fixture(scope="module")
def jina(weights: Path) -> Iterator[Run]:
    # FastMTP needs Jina's registration, which is not public; the decoder and
    # image path are DeepSeek-OCR's, run here without speculation.
    yield run_profile(
        JINA_OCR_V1,
        weights,
        PAGEMILL_VLLM_ENABLE_SPECULATION="false",
        PAGEMILL_VLLM_NONCOMMERCIAL_USE_ACCEPTED="true",
    )


@pytest.mark.parametrize("name", ["deepseek", "jina"])
def test_the_image_tokens_reach_the_prompt(name: str, request: pytest.FixtureRequest) -> None:
    run: Run = request.getfixturevalue(name)
    # The prompt's one <image> becomes the view's tokens.
    text_tokens = len(run.tokenizer(run.engine.profile.prompt).input_ids) - 1
    assert run.result.prompt_tokens == text_tokens + GLOBAL_VIEW_TOKENS
    assert run.attempts[0].measurement.prompt_tokens == run.result.prompt_tokens


@pytest.mark.parametrize("name", ["deepseek", "jina"])
def test_every_page_measurement_is_filled_in(name: str, request: pytest.FixtureRequest) -> None:
    run: Run = request.getfixturevalue(name)
    result, details = run.result, run.result.details
    assert details["profile"] == run.engine.profile.name
    assert details["licence"] == run.engine.profile.licence
    # Without speculation DeepSeek-OCR's own n-gram guard (vLLM's
    # NGramPerReqLogitsProcessor) runs on the first attempt.
    assert details["path"] == "guarded" and details["spec"] is None
    # Random weights never end the page: it stops at the model length, is
    # flagged, and is not retried (it was guarded already).
    assert result.finish_reason == "length"
    assert result.prompt_tokens + result.output_tokens == MAX_MODEL_LEN
    assert details["repetition"]["looping"] and not details["repetition"]["retried"]
    assert details["queue_seconds"] >= 0
    assert details["prefill_seconds"] > 0 and details["decode_seconds"] > 0
    assert details["gpu_seconds"] > 0 and details["gpu_seconds_settled"]
    assert result.device_seconds == pytest.approx(details["gpu_seconds"])
    assert result.device_kind == "cpu"
    [attempt] = run.attempts
    assert attempt.measurement.output_tokens == len(attempt.token_ids) == result.output_tokens


def test_deepseek_output_goes_through_the_grounding_rules(deepseek: Run) -> None:
    # The engine's Markdown is the grounding rules applied to what vLLM decoded.
    [attempt] = deepseek.attempts
    assert deepseek.result.markdown == to_markdown(attempt.text, "deepseek_grounding")[0]
    # Random weights write no grounding tags, so a grounded answer is put in
    # place of the decoded text at the step that turns attempts into the page.
    grounded = dataclasses.replace(attempt, text=GROUNDED)
    verdict = detect_loop(attempt.token_ids, "stop", DEEPSEEK_OCR.repetition)
    result = deepseek.engine._result(grounded, verdict, None)
    assert result.markdown == "# Invoice 2041\n\nTotal due: 412 EUR"
    assert result.details["model_metadata"] == {
        "grounding": [
            {"kind": "title", "boxes": [[112, 64, 530, 98]]},
            {"kind": "text", "boxes": [[112, 130, 880, 170], [112, 172, 600, 190]]},
            {"kind": "image", "boxes": [[700, 40, 880, 120]]},
        ]
    }


def test_jina_ocr_v1_keeps_its_licence_gate_and_plain_markdown(jina: Run) -> None:
    assert jina.result.details["commercial_use_permitted"] is False
    assert jina.engine.profile.output_format == "markdown"
    [attempt] = jina.attempts
    assert jina.result.markdown == attempt.text.strip()


def test_mtp_on_deepseek_ocr_needs_more_than_vllm_0_32_has(weights: Path, tmp_path: Path) -> None:
    """What docs/gpu.md says is missing for jina-ocr-v1's FastMTP on vLLM 0.32.

    With an MTP layer declared in the language model's config, vLLM still has
    no MTP draft for this architecture: SpeculativeConfig.hf_config_override
    maps only the architectures it knows (DeepSeek-V3, GLM-OCR, ...) to an MTP
    draft model type, DeepseekOCRForCausalLM is not among them, and the draft
    config keeps model_type deepseek_ocr, which is no MTP type.
    """
    import json
    import shutil

    from vllm.engine.arg_utils import AsyncEngineArgs

    from worker.engines.vllm.factory import engine_kwargs

    folder = tmp_path / "with-mtp"
    shutil.copytree(weights, folder)
    config = json.loads((folder / "config.json").read_text())
    config["language_config"]["num_nextn_predict_layers"] = 1
    (folder / "config.json").write_text(json.dumps(config))
    settings = VllmSettings(
        weights_path=folder,
        max_model_len=MAX_MODEL_LEN,
        enforce_eager=True,
        noncommercial_use_accepted=True,
    )
    kwargs, _ = engine_kwargs(dummy_weights(JINA_OCR_V1), settings, guard_engine=False)
    assert kwargs["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 3}
    with pytest.raises(NotImplementedError, match="Unsupported speculative method: 'mtp'"):
        AsyncEngineArgs(**kwargs).create_engine_config()


def test_a_page_at_the_profiles_resolution_is_tiled(weights: Path, deepseek: Run) -> None:
    """The tiles the engine run avoids, counted by the processor the engine uses.

    At the profile's 144 dpi an A4 page (1191 x 1684 px) is cut into 2 x 3
    tiles of 640 px beside the global view: 30 rows of 2 x 10 tokens plus a
    newline each, 630 more tokens. Running the encoders over seven views
    costs too much here; the processor alone is cheap.
    """
    from transformers import AutoTokenizer
    from vllm.transformers_utils.processors.deepseek_ocr import DeepseekOCRProcessor

    from worker.engines.vllm.inputs import prepare_image

    processor = DeepseekOCRProcessor(tokenizer=AutoTokenizer.from_pretrained(weights))
    [rendered] = render_pages(
        REPO / "samples" / "scanned-sentence.pdf",
        SourceKind.pdf,
        [1],
        DEEPSEEK_OCR.render_dpi,
        40_000_000,
    )
    assert rendered.image_png is not None
    counts = {}
    pages = {"small": deepseek.page.require_image(), "profile": rendered.image_png}
    for name, png in pages.items():
        image = prepare_image(png, DEEPSEEK_OCR.image)
        out = processor(prompt=DEEPSEEK_OCR.prompt, images=[image])
        counts[name] = int(out["num_image_tokens"][0])
    assert counts == {"small": GLOBAL_VIEW_TOKENS, "profile": GLOBAL_VIEW_TOKENS + 630}
    # The engine's prompt held what the processor counts for the page it read.
    text_tokens = len(deepseek.tokenizer(DEEPSEEK_OCR.prompt).input_ids) - 1
    assert deepseek.result.prompt_tokens == text_tokens + counts["small"]
