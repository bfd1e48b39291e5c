"""olmOCR-2's architecture (Qwen2.5-VL) reads page images on vLLM's CPU build.

A tiny Qwen2.5-VL (tiny_qwen_vl.py) is loaded as a deployment loads olmOCR-2:
the `olmocr-2` profile (its prompt, image preparation, sampling, repetition
guard and output rules) and settings read from the environment
(PAGEMILL_VLLM_PROFILE, PAGEMILL_VLLM_WEIGHTS_PATH). Two pages rendered by the
pipeline's own renderer, of different sizes, go through AsyncLLM at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from tiny_qwen_vl import FRONT_MATTER, PAGE_TEXT, TinyQwenVl, build_tiny_qwen_vl

from pagemill.domain import SourceKind
from worker.engines.base import EngineResult, PageInput
from worker.engines.vllm.engine import VllmEngine
from worker.engines.vllm.inputs import prepare_image
from worker.engines.vllm.profiles import OLMOCR_2
from worker.engines.vllm.settings import VllmSettings
from worker.render import render_pages

pytestmark = pytest.mark.timeout(300)

SAMPLES = REPO / "samples"
# What the pipeline renders for OCR at most (pagemill's default pixel cap).
MAX_RENDER_PIXELS = 40_000_000


@dataclass
class Run:
    model: TinyQwenVl
    pages: dict[str, PageInput]
    results: dict[str, EngineResult]
    tokenizer: Any


def rendered(path: Path, kind: SourceKind, dpi: int) -> PageInput:
    [page] = render_pages(path, kind, [1], dpi, MAX_RENDER_PIXELS)
    assert page.image_png is not None
    return PageInput(facts=page.facts, image_png=page.image_png, image_dpi=page.image_dpi)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    from transformers import AutoTokenizer

    model = build_tiny_qwen_vl(tmp_path_factory.mktemp("tiny-qwen-vl"), OLMOCR_2.prompt)
    pages = {
        # A scanned PDF page, rendered at the profile's 120 dpi (992 x 1403 px).
        "pdf": rendered(SAMPLES / "scanned-sentence.pdf", SourceKind.pdf, OLMOCR_2.render_dpi),
        # An uploaded 150 dpi scan, 1240 x 1755 px, taken as it is.
        "png": rendered(SAMPLES / "scanned-invoice.png", SourceKind.png, OLMOCR_2.render_dpi),
    }
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PAGEMILL_VLLM_PROFILE", "olmocr-2")
        env.setenv("PAGEMILL_VLLM_WEIGHTS_PATH", str(model.path))
        env.setenv("PAGEMILL_VLLM_ENFORCE_EAGER", "true")
        env.setenv("PAGEMILL_VLLM_MAX_NUM_SEQS", "4")
        settings = VllmSettings()
    engine = VllmEngine(settings=settings)
    assert engine.profile is OLMOCR_2
    try:
        with ThreadPoolExecutor(max_workers=len(pages)) as pool:
            results = dict(zip(pages, pool.map(engine.convert, pages.values()), strict=True))
    finally:
        engine.shutdown(drain_timeout_s=5)
    yield Run(model, pages, results, AutoTokenizer.from_pretrained(model.path))


def qwen_image_tokens(width: int, height: int) -> int:
    # One token per 28 x 28 px (14 px patches merged 2 x 2), each side rounded
    # to a multiple of 28; these pages are well inside the pixel limits.
    return round(width / 28) * round(height / 28)


def test_prompt_tokens_hold_the_image_tokens_of_each_page(run: Run) -> None:
    # The prompt's one <|image_pad|> becomes one token per 28 x 28 px of the
    # image the profile prepared (longest side 1288 px).
    text_tokens = len(run.tokenizer(OLMOCR_2.prompt).input_ids) - 1
    sizes = {
        name: prepare_image(page.require_image(), OLMOCR_2.image).size
        for name, page in run.pages.items()
    }
    assert sizes == {"pdf": (911, 1288), "png": (910, 1288)}
    for name, result in run.results.items():
        width, height = sizes[name]
        assert result.prompt_tokens == text_tokens + qwen_image_tokens(width, height), name
        assert result.details["attempts"][0]["prompt_tokens"] == result.prompt_tokens
    # 911 px rounds up to 33 tiles of 28 px, 910 px down to 32: 46 x 33 = 1,518
    # image tokens for the PDF page, 46 x 32 = 1,472 for the PNG.
    assert run.results["pdf"].prompt_tokens - text_tokens == 1518
    assert run.results["png"].prompt_tokens - text_tokens == 1472


def test_output_follows_the_profiles_rules(run: Run) -> None:
    # olmOCR-2 answers with YAML front matter: it leaves the Markdown and is
    # kept as the page's model metadata.
    for result in run.results.values():
        assert result.finish_reason == "stop"
        assert result.markdown == PAGE_TEXT
        assert result.details["model_metadata"] == FRONT_MATTER
        answer_tokens = len(run.tokenizer(run.model.answer).input_ids)
        assert result.output_tokens == answer_tokens + 1  # and <|im_end|>


def test_every_page_measurement_is_filled_in(run: Run) -> None:
    for name, result in run.results.items():
        details = result.details
        assert details["profile"] == "olmocr-2" and details["licence"] == "Apache-2.0"
        # No speculation in this profile: the repetition guard runs from the start.
        assert details["path"] == "guarded" and details["spec"] is None
        assert not details["repetition"]["looping"] and not details["repetition"]["retried"]
        assert details["queue_seconds"] >= 0, name
        # Prefill includes the vision encoder over every patch of the page.
        assert details["prefill_seconds"] > 0, name
        assert details["decode_seconds"] > 0, name
        assert details["gpu_seconds"] > 0 and details["gpu_seconds_settled"], name
        assert result.device_seconds == pytest.approx(details["gpu_seconds"])
        assert result.device_kind == "cpu"
        [attempt] = details["attempts"]
        assert attempt["output_tokens"] == result.output_tokens
