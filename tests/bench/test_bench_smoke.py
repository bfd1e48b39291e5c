"""Every benchmark of `make bench` runs on tiny inputs and produces its numbers.

No timing is asserted here: the machines are shared and noisy, and the targets
live in BENCHMARKS.md, where `make bench` reports them met or missed.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.services import ROOT

pytestmark = pytest.mark.timeout(480)

RATIO_FIGURES = ("orchestration", "rendering", "cpu_ocr")
GPU_FIGURES = ("saturation_vllm", "saturation_standin")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def test_every_benchmark_runs_and_reports(tmp_path: Path) -> None:
    # The benchmark makes its own database, queue prefix and bucket: none of the
    # test session's PAGEMILL_* settings may leak into it.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAGEMILL_")}
    done = subprocess.run(
        [sys.executable, "-m", "bench.run", "--smoke", "--out", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=450,
        check=False,
    )
    print(done.stdout[-6000:])
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["errors"] == {}, done.stdout[-6000:] + done.stderr[-3000:]
    assert done.returncode == 0, done.stderr[-3000:]
    figures = results["figures"]

    for name in RATIO_FIGURES:
        figure = figures[name]
        assert _number(figure["ratio"]["median"]), name
        assert _number(figure["service_pages_per_s"]["median"]), name
        assert _number(figure["reference_pages_per_s"]["median"]), name
        assert isinstance(figure["met"], bool), name
    assert _number(figures["orchestration"]["cpu_ms_per_page"]["median"])
    # The host's speed beside the service's CPU: the no-op worker's CPU a task, measured.
    assert _number(figures["orchestration"]["reference_cpu_ms_per_task"]["median"])
    assert _number(figures["orchestration"]["service_cpu_in_reference_tasks"]["median"])

    memory = figures["memory_worker"]
    assert _number(memory["prepare_peak_rss_mb"])
    assert _number(memory["worker_rss_before_mb"]) and _number(memory["worker_rss_after_mb"])
    assert memory["pages"] > 0

    routing = figures["routing"]
    assert routing["pages"] > 0 and 0 <= routing["share_without_ocr"] <= 1
    assert routing["gpu_seconds_saved"] >= 0

    quotes = figures["quotes"]
    assert quotes["jobs"] == 2 and not quotes["failed_jobs"]
    assert math.isfinite(quotes["batch_abs_error_median"])
    assert all(_number(float(job["quote_usd"])) for job in quotes["per_job"])
    assert all(_number(float(job["cost_usd"])) for job in quotes["per_job"])

    rows = figures["projection"]["rows"]
    assert {row["gpu"] for row in rows} == {"L4", "A100 40GB"}
    assert all(_number(row["usd_per_1000_pages"]) for row in rows)

    vllm_installed = (ROOT / ".venv-vllm" / "bin" / "python").exists()
    for name in GPU_FIGURES:
        figure = figures[name]
        if not vllm_installed:
            assert "skipped" in figure
            continue
        assert _number(figure["ratio"]["median"]), name
        assert _number(figure["worker_in_flight_steady_mean"]["median"]), name
    if vllm_installed:
        assert _number(figures["saturation_standin"]["worker_batch_steady_mean"]["median"])

    report = (tmp_path / "BENCHMARKS.md").read_text()
    for title in ("Orchestration ceiling", "Rendering", "CPU OCR", "Memory", "Routing", "Quote"):
        assert title in report
