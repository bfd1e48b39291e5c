"""Figure 3 (engine saturation), run in .venv-vllm by bench/gpu.py:
`python -m bench.gpu_saturation --out FILE [--smoke] [--runs N] ...`.

For each engine ("vllm": real vLLM CPU build, tiny text model; "glm": real
vLLM CPU build, tiny GLM-OCR image model with MTP, 300-token pages; "standin":
the continuous-batching stand-in), the same pages go through
  direct: threads calling VllmEngine.convert with C pages in flight, and
  worker: Celery tasks on a queue, a threads-pool worker of concurrency C,
          each thread blocking on the engine through the bridge,
and both report pages/s and the pages in flight over time.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

from bench import gpu_engines

IN_FLIGHT = 40  # worker threads, and the direct driver's threads
MAX_NUM_SEQS = 32  # the engine's batch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--modes", default="vllm,standin")
    args = parser.parse_args()
    weights = args.workdir / "tiny-llama" / "target"
    modes = args.modes.split(",")
    if "vllm" in modes and not weights.exists():
        from gpu_tiny_model import build_for_tests

        build_for_tests(weights)
    glm_weights = gpu_engines.glm_weights(args.workdir) if "glm" in modes else weights
    worker = _GpuWorker(args, weights, glm_weights)
    try:
        results = {
            mode: measure(mode, args, glm_weights if mode == "glm" else weights, worker)
            for mode in modes
        }
    finally:
        worker.stop()
    args.out.write_text(json.dumps(results, indent=1))


class _GpuWorker:
    """One threads-pool Celery worker of bench.gpu_app serving both engines."""

    def __init__(self, args: argparse.Namespace, weights: Path, glm_weights: Path) -> None:
        import redis
        from celery import Celery

        self.key = args.key
        self.queue = args.key
        self.store = redis.Redis.from_url(args.redis_url)
        self.client = Celery("pagemill_bench_gpu", broker=args.redis_url)
        self.log_path = args.workdir / "gpu-worker.log"
        env = {
            **os.environ,
            "PYTHONPATH": str(gpu_engines.ROOT),
            "PAGEMILL_BENCH_REDIS_URL": args.redis_url,
            "PAGEMILL_BENCH_QUEUE": self.queue,
            "PAGEMILL_BENCH_WEIGHTS": str(weights),
            "PAGEMILL_BENCH_GLM_WEIGHTS": str(glm_weights),
            "PAGEMILL_BENCH_MAX_NUM_SEQS": str(MAX_NUM_SEQS),
            "PAGEMILL_BENCH_SMOKE": "1" if args.smoke else "0",
        }
        with self.log_path.open("wb") as sink:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "bench.gpu_app",
                    "worker",
                    "--pool=threads",
                    f"--concurrency={IN_FLIGHT}",
                    f"--queues={self.queue}",
                    f"--hostname={self.key}@%h",
                    "--without-heartbeat",
                    "--without-gossip",
                    "--without-mingle",
                    "--loglevel=WARNING",
                ],
                cwd=gpu_engines.ROOT,
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )

    def batch(self, mode: str, batch: str, pages: int) -> dict[str, Any]:
        name = f"{self.key}:{mode}:{batch}"
        self.store.delete(name, f"{name}-report")
        started = time.monotonic()
        for index in range(pages):
            self.client.send_task(
                "pagemill_bench.gpu_page", args=[mode, index, name], queue=self.queue
            )
        self._wait(name, pages)
        # Sync client: redis-py types its replies as possibly awaitable.
        items = cast(list[bytes], self.store.lrange(name, 0, -1))
        records = [json.loads(item) for item in items]
        self.client.send_task(
            "pagemill_bench.gpu_report", args=[mode, f"{name}-report"], queue=self.queue
        )
        self._wait(f"{name}-report", 1)
        report = json.loads(cast(bytes | None, self.store.lindex(f"{name}-report", 0)) or b"{}")
        report["admitted"] = [at for at in report["admitted"] if at >= started]
        done = sorted(r["done_at"] for r in records)
        tokens = sum(r["tokens"] or 0 for r in records)
        return _summarise(started, done, tokens, report)

    def _wait(self, name: str, count: int) -> None:
        deadline = time.monotonic() + 900
        while cast(int, self.store.llen(name)) < count:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"GPU bench worker stopped: {self.log_path.read_text()[-3000:]}")
            time.sleep(0.01)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        for stale in self.store.scan_iter(f"*{self.key}*"):
            self.store.delete(stale)


def measure(
    mode: str, args: argparse.Namespace, weights: Path, worker: _GpuWorker
) -> dict[str, Any]:
    standin = gpu_engines.STANDIN_SMOKE if args.smoke else gpu_engines.STANDIN_FULL
    # The tiny text model's pages are short (about 20 tokens): many of them, so
    # a run lasts seconds, not the length of one scheduling hiccup. The tiny
    # GLM-OCR's are 300 tokens: six batches' worth.
    pages = (
        {"vllm": 40, "glm": 8, "standin": 64}
        if args.smoke
        else {
            "vllm": 600,
            "glm": 6 * MAX_NUM_SEQS,
            "standin": 160,
        }
    )
    pages_this_mode = pages[mode]
    direct = gpu_engines.build(mode, weights=weights, max_num_seqs=MAX_NUM_SEQS, standin=standin)
    try:
        _progress(f"{mode}: starting the direct engine")
        direct.start()
        # Warm-up, both sides: engine start and first requests are not per page.
        # (The tiny GLM-OCR's pages take seconds each: a few warm it.)
        warm = 4 if mode == "glm" else IN_FLIGHT
        _direct_batch(direct, mode, warm, IN_FLIGHT)
        _progress(f"{mode}: direct engine warm; warming the worker")
        worker.batch(mode, "warm", warm)
        _progress(f"{mode}: worker warm")
        runs: list[dict[str, Any]] = []
        for index in range(args.runs):
            # Alternate the order, so drift in machine load falls on both sides.
            if index % 2:
                worker_run = worker.batch(mode, f"run{index}", pages_this_mode)
                direct_run = _direct_batch(direct, mode, pages_this_mode, IN_FLIGHT)
            else:
                direct_run = _direct_batch(direct, mode, pages_this_mode, IN_FLIGHT)
                worker_run = worker.batch(mode, f"run{index}", pages_this_mode)
            runs.append({"direct": direct_run, "worker": worker_run})
            print(
                f"  gpu {mode} run {index + 1}: direct {direct_run['pages_per_s']:.2f}, "
                f"worker {worker_run['pages_per_s']:.2f} pages/s, in flight (worker, steady) "
                f"mean {worker_run['steady']['bridge_mean']:.1f}",
                flush=True,
            )
    finally:
        direct.engine.shutdown(drain_timeout_s=0)
        if direct.gauge is not None and direct.double is None:
            direct.gauge.stop()
    return {
        "engine": mode,
        "pages": pages_this_mode,
        "in_flight": IN_FLIGHT,
        "max_num_seqs": MAX_NUM_SEQS,
        "answer_tokens": _answer_tokens(mode),
        "standin": None
        if mode != "standin"
        else {
            "step_seconds": standin.step_seconds,
            "tokens_per_step": standin.tokens_per_step,
            "tokens_per_page_mean": gpu_engines.TOKENS_PER_PAGE,
            "tokens_per_page_sd": gpu_engines.TOKENS_SPREAD,
        },
        "runs": runs,
    }


def _direct_batch(
    built: gpu_engines.Built, mode: str, pages: int, in_flight: int
) -> dict[str, Any]:
    done: list[float] = []
    tokens: list[int] = []

    def one(index: int) -> None:
        result = built.engine.convert(gpu_engines.page_input(mode, index))
        done.append(time.monotonic())
        tokens.append(result.output_tokens or 0)

    admitted_before = len(built.admitted)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=in_flight) as pool:
        list(pool.map(one, range(pages)))
    report = {
        "bridge_in_flight": built.engine.bridge.in_flight.samples(),
        "admitted": built.admitted[admitted_before:],
    }
    if built.gauge is not None:
        report["batch_per_step"] = built.gauge.samples()
    return _summarise(started, sorted(done), sum(tokens), report)


def _summarise(
    started: float, done: list[float], tokens: int, report: dict[str, Any]
) -> dict[str, Any]:
    from worker.bridge import summarise_samples

    pages = len(done)
    end = done[-1]
    bridge = [tuple(s) for s in report["bridge_in_flight"]]
    # Steady state: from the first moment the bridge held its most pages to the
    # moment the backlog ran out (the last page entered the engine, or, where
    # admissions are not seen, the last page left minus one page's time).
    peak = max((value for at, value in bridge if started <= at <= end), default=0)
    steady_start = next((at for at, value in bridge if at >= started and value == peak), started)
    admitted = report.get("admitted") or []
    steady_end = admitted[-1] if admitted else _backlog_end(done, peak)
    steady_end = max(steady_end, steady_start + 1e-3)
    whole = summarise_samples(bridge, started, end)  # type: ignore[arg-type]
    steady = summarise_samples(bridge, steady_start, steady_end)  # type: ignore[arg-type]
    summary: dict[str, Any] = {
        "pages": pages,
        "wall_s": end - started,
        "pages_per_s": pages / (end - started),
        "output_tokens": tokens,
        "bridge_in_flight_whole_run": {
            "min": whole.minimum,
            "max": whole.maximum,
            "mean": whole.mean,
        },
        "steady": {
            "seconds": steady_end - steady_start,
            "bridge_min": steady.minimum,
            "bridge_mean": steady.mean,
            "bridge_max": steady.maximum,
        },
        "bridge_over_time": _series(bridge, started, end),
    }
    if "batch_per_step" in report:
        steps = [tuple(s) for s in report["batch_per_step"]]
        batch = summarise_samples(steps, steady_start, steady_end)  # type: ignore[arg-type]
        summary["steady"].update(
            batch_min=batch.minimum, batch_mean=batch.mean, batch_max=batch.maximum
        )
        summary["batch_over_time"] = _series(steps, started, end)
    return summary


def _answer_tokens(mode: str) -> int | None:
    if mode != "glm":
        return None
    from tiny_glm_ocr import BENCH_ANSWER_TOKENS

    return BENCH_ANSWER_TOKENS


def _progress(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def _backlog_end(done: list[float], in_flight: int) -> float:
    # After the (pages - in_flight)-th page finished, fewer than in_flight remained.
    index = max(0, len(done) - max(in_flight, 1) - 1)
    return done[index]


def _series(samples: list[Any], start: float, end: float, points: int = 10) -> list[float]:
    """Time-weighted mean of a gauge in each tenth of the run."""
    from worker.bridge import summarise_samples

    width = (end - start) / points
    return [
        round(summarise_samples(samples, start + i * width, start + (i + 1) * width).mean, 1)
        for i in range(points)
    ]


if __name__ == "__main__":
    main()
