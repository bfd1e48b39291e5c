"""`pagemill engine-bench`: run the vLLM engine standalone and measure it.

N pages at concurrency C, once with the profile's speculative decoding and
once without, through the same adapter and bridge as the worker. Prints
pages/s, tokens per page, tokens/s, acceptance, tokens per step and GPU
seconds per page, so an operator can reproduce the published figures on
their own hardware (and see whether speculation pays at their batch size:
it pays most when decoding is memory-bound and can lose at full batch).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from worker.engines.base import EngineResult, PageFacts, PageInput
from worker.engines.vllm.engine import VllmEngine
from worker.engines.vllm.measurements import SpecMetrics
from worker.engines.vllm.profiles import ModelProfile, get_profile
from worker.engines.vllm.settings import VllmSettings

Speculation = Literal["both", "on", "off"]
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff"}


@dataclass(frozen=True)
class BenchResult:
    label: str  # "speculative" or "plain"
    pages: int
    concurrency: int
    wall_seconds: float
    output_tokens: int
    spec: SpecMetrics  # from the engine's own counters over the run
    device_seconds: float  # time-share charges, summed over pages
    busy_seconds: float
    idle_seconds: float
    retried_pages: int

    @property
    def pages_per_second(self) -> float:
        return self.pages / self.wall_seconds

    @property
    def tokens_per_page(self) -> float:
        return self.output_tokens / self.pages

    @property
    def tokens_per_second(self) -> float:
        return self.output_tokens / self.wall_seconds

    @property
    def device_seconds_per_page(self) -> float:
        return self.device_seconds / self.pages


def load_pages(inputs: Sequence[Path], count: int, profile: ModelProfile) -> list[PageInput]:
    """`count` pages: the given page images, repeated as needed; or, for text
    profiles, pages numbered 1..count (their prompt is built from the number)."""
    if profile.input_kind == "text":
        return [_page(number, b"", profile.render_dpi) for number in range(1, count + 1)]
    files = sorted(
        path
        for item in inputs
        for path in (item.iterdir() if item.is_dir() else [item])
        if path.suffix.lower() in IMAGE_SUFFIXES
    )
    if not files:
        raise ValueError("no page images given (PNG or JPEG files, or folders of them)")
    images = itertools.cycle([path.read_bytes() for path in files])
    return [_page(number, next(images), profile.render_dpi) for number in range(1, count + 1)]


def run_bench(
    profile: ModelProfile,
    settings: VllmSettings,
    pages: Sequence[PageInput],
    *,
    concurrency: int,
    speculative: bool,
) -> BenchResult:
    engine = VllmEngine(profile, settings.model_copy(update={"enable_speculation": speculative}))
    try:
        engine.start()  # loading is not part of the measurement
        # One page first: some paths compile on their first request (ngram
        # takes about a second on CPU), which is not what a worker pays per page.
        engine.convert(pages[0])
        before = engine.spec_counters()
        usage_before = engine.usage()
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            results: list[EngineResult] = list(pool.map(engine.convert, pages))
        wall = time.monotonic() - started
        spec = (engine.spec_counters() - before).as_spec()
        usage = engine.usage()
    finally:
        engine.shutdown(drain_timeout_s=0)
    return BenchResult(
        label="speculative" if engine.runner.speculative else "plain",
        pages=len(results),
        concurrency=concurrency,
        wall_seconds=wall,
        output_tokens=sum(r.output_tokens or 0 for r in results),
        spec=spec,
        device_seconds=sum(r.device_seconds for r in results),
        busy_seconds=(usage.busy_ns - usage_before.busy_ns) / 1e9,
        idle_seconds=(usage.idle_ns - usage_before.idle_ns) / 1e9,
        retried_pages=sum(1 for r in results if r.details["repetition"]["retried"]),
    )


def format_results(results: Sequence[BenchResult]) -> str:
    rows = [
        ("", *[r.label for r in results]),
        ("pages", *[str(r.pages) for r in results]),
        ("concurrency", *[str(r.concurrency) for r in results]),
        ("pages/s", *[f"{r.pages_per_second:.3f}" for r in results]),
        ("tokens/page", *[f"{r.tokens_per_page:.1f}" for r in results]),
        ("tokens/s", *[f"{r.tokens_per_second:.1f}" for r in results]),
        ("acceptance", *[_acceptance(r) for r in results]),
        ("tokens/step", *[f"{r.spec.tokens_per_step:.2f}" for r in results]),
        ("GPU s/page", *[f"{r.device_seconds_per_page:.4f}" for r in results]),
        ("busy s / idle s", *[f"{r.busy_seconds:.2f} / {r.idle_seconds:.2f}" for r in results]),
        ("retried pages", *[str(r.retried_pages) for r in results]),
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows
    )


def _acceptance(result: BenchResult) -> str:
    if not result.spec.draft_tokens:
        return "-"
    return f"{result.spec.acceptance_rate:.1%}"


def engine_bench_command(
    inputs: Sequence[Path],
    *,
    pages: int = 64,
    concurrency: int = 32,
    speculation: Speculation = "both",
    profile: str | None = None,
    weights_dir: Path | None = None,
    max_num_seqs: int | None = None,
    settings: VllmSettings | None = None,
    model_profile: ModelProfile | None = None,
    echo: Callable[[str], None] = print,
) -> list[BenchResult]:
    """Benchmark the vLLM engine on `pages` pages at `concurrency`.

    `inputs` are page images (files or folders), cycled to make `pages` pages;
    text profiles ignore them. Options left out come from PAGEMILL_VLLM_*.
    `model_profile` passes a profile object directly (tests, experiments).
    """
    base = settings or VllmSettings()
    updates: dict[str, object] = {}
    if weights_dir is not None:
        updates["weights_dir"] = weights_dir
    if max_num_seqs is not None:
        updates["max_num_seqs"] = max_num_seqs
    base = base.model_copy(update=updates)
    chosen = model_profile or get_profile(profile or base.profile)
    batch = load_pages(inputs, pages, chosen)
    modes = {"both": [True, False], "on": [True], "off": [False]}[speculation]
    if chosen.speculative_config is None and True in modes:
        echo(f"{chosen.name} has no speculative decoding; running without.")
        modes = [False]
    results = [
        run_bench(chosen, base, batch, concurrency=concurrency, speculative=mode) for mode in modes
    ]
    echo(f"{chosen.name} ({chosen.licence}), {pages} pages, concurrency {concurrency}")
    echo(format_results(results))
    return results


def _page(number: int, image: bytes, dpi: int) -> PageInput:
    # An A4 page.
    facts = PageFacts.image_only(number, width_pt=595.0, height_pt=842.0)
    return PageInput(facts=facts, image_png=image, image_dpi=dpi)
