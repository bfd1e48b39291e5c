"""The two engines of figure 3, built the same way by the direct driver and by
the benchmark's GPU worker (bench/gpu_app.py). Runs in .venv-vllm only.

- "vllm": the real VllmEngine (adapter, bridge, runner, time-share accountant)
  over vLLM's CPU build serving the tiny planted Llama of tests/gpu.
- "standin": the same VllmEngine over a continuous-batching stand-in for
  AsyncLLM (tests/gpu/gpu_doubles.ScriptedAsyncLLM): a fixed step time, up to
  max_num_seqs sequences advanced together each step, each page's output
  length drawn around 1,085 tokens.
"""

from __future__ import annotations

import os
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests/gpu"))

for _name, _value in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
}.items():
    os.environ.setdefault(_name, _value)

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


@dataclass
class Built:
    engine: Any  # VllmEngine
    double: Any = None  # ScriptedAsyncLLM for the stand-in
    admitted: list[float] = field(default_factory=list)  # when each page entered the batch


def build(mode: str, *, weights: Path, max_num_seqs: int, standin: StandIn) -> Built:
    from worker.engines.vllm.engine import VllmEngine
    from worker.engines.vllm.settings import VllmSettings

    settings = VllmSettings(
        weights_path=weights,
        max_num_seqs=max_num_seqs,
        max_model_len=512 if mode == "vllm" else 8192,
        task_time_limit_s=600,
    )
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

    # The tiny model knows pages 1..9; the stand-in takes any number.
    return scan_page((index % VLLM_PAGES) + 1 if mode == "vllm" else index + 1)
