"""The two engines of figure 3, built the same way by the direct driver and by
the benchmark's GPU worker (bench/gpu_app.py). Runs in .venv-vllm only.

- "vllm": the real VllmEngine (adapter, bridge, runner, time-share accountant)
  over vLLM's CPU build serving the tiny planted Llama of tests/gpu.
- "glm": the real VllmEngine over vLLM's CPU build serving the tiny GLM-OCR
  of tests/gpu (an image model, with its MTP draft on) through the `glm-ocr`
  profile: real page images in, a fixed 300-token answer out, so a page's
  engine time is long against Celery's per-message cost.
- "standin": the same VllmEngine over a continuous-batching stand-in for
  AsyncLLM (tests/gpu/gpu_doubles.ScriptedAsyncLLM): a fixed step time, up to
  max_num_seqs sequences advanced together each step, each page's output
  length drawn around 1,085 tokens.
"""

from __future__ import annotations

import random
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support import vllm_cpu_env

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests/gpu"))

vllm_cpu_env.apply()

TOKENS_PER_PAGE = 1085
TOKENS_SPREAD = 150  # standard deviation of the drawn output lengths


@dataclass(frozen=True)
class StandIn:
    """Timing of the continuous-batching stand-in."""

    step_seconds: float
    tokens_per_step: int
    max_num_seqs: int = 32

    def tokens(self, page: int) -> int:
        drawn = random.Random(page).gauss(TOKENS_PER_PAGE, TOKENS_SPREAD)
        return max(200, round(drawn))

    def page_seconds(self, page: int) -> float:
        return self.tokens(page) / self.tokens_per_step * self.step_seconds


STANDIN_FULL = StandIn(step_seconds=0.02, tokens_per_step=3)
STANDIN_SMOKE = StandIn(step_seconds=0.004, tokens_per_step=12)
VLLM_PAGES = 9  # the tiny model's planted (non-looping) pages: 1..9
# The tiny GLM-OCR's pages: the repository's sample PDFs rendered by the pipeline
# at 72 dpi (A4: 595 x 842 px, 630 image tokens), small enough that the vision
# tower on 2 CPU cores does not dwarf decoding.
GLM_DPI = 72
GLM_MTP = "noisy"  # an MTP draft right part of the time, as a trained one is


def glm_weights(workdir: Path) -> Path:
    """The tiny GLM-OCR with a 300-token answer, built once under `workdir`."""
    from tiny_glm_ocr import BENCH_ANSWER_TOKENS, build_tiny_glm_ocr

    root = workdir / "tiny-glm-ocr"
    if not (root / GLM_MTP / "model.safetensors").exists():
        build_tiny_glm_ocr(root, answer_tokens=BENCH_ANSWER_TOKENS)
    return root / GLM_MTP


class RunningGauge:
    """Samples vLLM's own count of running requests: the batch, step by step.

    Reads the engine's Prometheus gauge (vllm:num_requests_running) every few
    milliseconds, in the process that owns the engine, as (monotonic, value).
    """

    def __init__(self, model_name: str, interval_s: float = 0.02) -> None:
        self.model_name = model_name
        self.interval_s = interval_s
        self._samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="running-gauge", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from vllm.v1.metrics.reader import Gauge, get_metrics_snapshot

        last: float | None = None
        while not self._stop.wait(self.interval_s):
            value = sum(
                m.value
                for m in get_metrics_snapshot()
                if isinstance(m, Gauge)
                and m.name == "vllm:num_requests_running"
                and m.labels.get("model_name") == self.model_name
            )
            if value != last:
                self._samples.append((time.monotonic(), float(value)))
                last = value

    def samples(self) -> list[tuple[float, float]]:
        return list(self._samples)

    def stop(self) -> None:
        self._stop.set()


@dataclass
class Built:
    engine: Any  # VllmEngine
    double: Any = None  # ScriptedAsyncLLM for the stand-in
    admitted: list[float] = field(default_factory=list)  # when each page entered the batch
    gauge: Any = None  # the batch per step: the stand-in's, or vLLM's running requests

    def start(self) -> None:
        self.engine.start()
        if self.double is not None:
            self.gauge = self.double.gauge
        elif self.engine.profile.input_kind == "image":
            self.gauge = RunningGauge(self.engine.profile.name)


def build(mode: str, *, weights: Path, max_num_seqs: int, standin: StandIn) -> Built:
    from worker.engines.vllm.engine import VllmEngine
    from worker.engines.vllm.settings import VllmSettings

    settings = VllmSettings(
        weights_path=weights,
        max_num_seqs=max_num_seqs,
        max_model_len=512 if mode == "vllm" else 8192,
        task_time_limit_s=600,
        enforce_eager=mode == "glm",
    )
    if mode == "glm":
        from worker.engines.vllm.profiles import GLM_OCR

        return Built(VllmEngine(GLM_OCR, settings))
    if mode == "vllm":
        from gpu_tiny_model import tiny_profile

        profile = tiny_profile(None)
        return Built(VllmEngine(profile, settings))  # type: ignore[arg-type]
    from gpu_doubles import Script, ScriptedAsyncLLM, scripted_profile

    built = Built(engine=None)
    double = ScriptedAsyncLLM(
        Script(
            seconds=standin.page_seconds,
            tokens_per_step=standin.tokens_per_step,
            step_seconds=standin.step_seconds,
        ),
        max_num_seqs,
        on_admit=lambda page: built.admitted.append(time.monotonic()),
    )
    # Output lengths are long by design: no loop detection on this stand-in.
    profile = scripted_profile("continuous-batching-stand-in", detect_min_repeats=10_000)
    built.double = double
    built.engine = VllmEngine(profile, settings, engine_factory=lambda kwargs, loggers: double)
    return built


def page_input(mode: str, index: int) -> Any:
    from gpu_doubles import scan_page

    if mode == "glm":
        pages = _glm_pages()
        return pages[index % len(pages)]
    # The tiny model knows pages 1..9; the stand-in takes any number.
    return scan_page((index % VLLM_PAGES) + 1 if mode == "vllm" else index + 1)


_glm_page_cache: list[Any] = []


def _glm_pages() -> list[Any]:
    """Every page of the repository's sample PDFs, rendered as the pipeline does."""
    if not _glm_page_cache:
        import pymupdf

        from pagemill.domain import SourceKind
        from worker.engines.base import PageInput
        from worker.render import render_pages

        for path in sorted((ROOT / "samples").glob("*.pdf")):
            with pymupdf.open(path) as document:
                numbers = range(1, document.page_count + 1)
            for page in render_pages(path, SourceKind.pdf, numbers, GLM_DPI, 40_000_000):
                assert page.image_png is not None
                _glm_page_cache.append(
                    PageInput(facts=page.facts, image_png=page.image_png, image_dpi=GLM_DPI)
                )
    return _glm_page_cache
