"""Runs the `glm-ocr` profile on the tiny GLM-OCR as a deployment would.

Settings come from the environment (PAGEMILL_VLLM_PROFILE,
PAGEMILL_VLLM_WEIGHTS_PATH, ...), the profile is the production one, and the
pages are rendered by the pipeline's own renderer from the repository's
samples. Pages go in from one thread each, as Celery's threads pool sends
them, and the engine's speculative counters are read around the run.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO

from pagemill.domain import SourceKind
from worker.engines.base import EngineResult, PageInput
from worker.engines.vllm.engine import VllmEngine
from worker.engines.vllm.measurements import SpecCounters
from worker.engines.vllm.profiles import GLM_OCR
from worker.engines.vllm.settings import VllmSettings
from worker.engines.vllm.timeshare import Usage
from worker.render import render_pages

SAMPLES = REPO / "samples"
# What the pipeline renders for OCR at most (pagemill's default pixel cap).
MAX_RENDER_PIXELS = 40_000_000


def rendered(path: Path, kind: SourceKind, dpi: int = GLM_OCR.render_dpi) -> PageInput:
    [page] = render_pages(path, kind, [1], dpi, MAX_RENDER_PIXELS)
    assert page.image_png is not None
    return PageInput(facts=page.facts, image_png=page.image_png, image_dpi=page.image_dpi)


def sample_pages() -> dict[str, PageInput]:
    """Two real pages of different sizes, as the pipeline hands them to OCR."""
    return {
        # A scanned PDF page rendered at the profile's 144 dpi: 1191 x 1684 px.
        "pdf": rendered(SAMPLES / "scanned-sentence.pdf", SourceKind.pdf),
        # An uploaded 150 dpi scan, 1240 x 1755 px, taken as it is.
        "png": rendered(SAMPLES / "scanned-invoice.png", SourceKind.png),
    }


@dataclass
class GlmRun:
    results: dict[str, EngineResult]
    counters: SpecCounters  # the engine's own, over the pages of this run
    usage: Usage
    speculative: bool


def run_glm_ocr(weights: Path, pages: dict[str, PageInput], *, speculation: bool = True) -> GlmRun:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PAGEMILL_VLLM_PROFILE", "glm-ocr")
        env.setenv("PAGEMILL_VLLM_WEIGHTS_PATH", str(weights))
        env.setenv("PAGEMILL_VLLM_ENFORCE_EAGER", "true")
        env.setenv("PAGEMILL_VLLM_MAX_NUM_SEQS", "4")
        env.setenv("PAGEMILL_VLLM_ENABLE_SPECULATION", "true" if speculation else "false")
        settings = VllmSettings()
    engine = VllmEngine(settings=settings)
    assert engine.profile is GLM_OCR
    try:
        engine.start()
        before = engine.spec_counters() if engine.runner.speculative else SpecCounters()
        with ThreadPoolExecutor(max_workers=len(pages)) as pool:
            results = dict(zip(pages, pool.map(engine.convert, pages.values()), strict=True))
        counters = engine.spec_counters() - before if engine.runner.speculative else SpecCounters()
        usage = engine.usage()
    finally:
        engine.shutdown(drain_timeout_s=5)
    return GlmRun(results, counters, usage, engine.runner.speculative)


def acceptance_sums(run: GlmRun) -> tuple[int, int, int]:
    """Steps, drafted and accepted tokens summed over every attempt of every page."""
    specs = [a["spec"] for r in run.results.values() for a in r.details["attempts"] if a["spec"]]
    return (
        sum(s["steps"] for s in specs),
        sum(s["draft_tokens"] for s in specs),
        sum(s["accepted_tokens"] for s in specs),
    )
