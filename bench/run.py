"""`make bench`: every benchmark, side by side with its reference, in one run.

    python -m bench.run [--runs N] [--smoke] [--out DIR] [--only a,b]

Writes DIR/results.json (every run's raw numbers) and DIR/BENCHMARKS.md (the
report: machine, inputs, commands, each figure's median, its target met or
missed and by how much). The defaults write both at the top of the repository.
`--smoke` runs every benchmark once on tiny inputs: `make test` uses it so that
none of them rots; its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import ROOT, Plan, machine, tool_version
from bench.stack import BENCH_ENV, configure_env

FIGURES = (
    "routing",
    "rendering",
    "cpu_ocr",
    "invoice_extraction",
    "orchestration",
    "quotes",
    "gpu",
    "projection",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=None, help="runs per figure (default 5)")
    parser.add_argument("--smoke", action="store_true", help="tiny inputs, one run")
    parser.add_argument("--out", type=Path, default=ROOT, help="where the report and JSON go")
    parser.add_argument("--only", default=",".join(FIGURES), help="comma-separated figures")
    args = parser.parse_args(argv)
    runs = args.runs or (1 if args.smoke else 5)
    only = set(args.only.split(","))
    configure_env()
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="pagemill-bench-"))
    plan = Plan(smoke=args.smoke, runs=runs, workdir=workdir)
    figures: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}

    def log(message: str) -> None:
        print(message, flush=True)

    def attempt(name: str, step: Callable[[], dict[str, dict[str, Any]]]) -> None:
        if name not in only:
            return
        log(f"[{time.monotonic() - started:6.0f} s] {name}")
        try:
            figures.update(step())
        except Exception:
            errors[name] = traceback.format_exc()
            log(f"{name} failed:\n{errors[name]}")

    from bench import (
        cpu_ocr,
        gpu,
        invoice_extraction,
        orchestration,
        projection,
        quotes,
        rendering,
        routing,
    )
    from bench.stack import services_up

    attempt("routing", lambda: routing.run(plan, log))
    attempt("invoice_extraction", lambda: invoice_extraction.run(plan, log))
    with services_up(workdir) as stack:
        attempt("rendering", lambda: rendering.run(plan, log))
        attempt("cpu_ocr", lambda: cpu_ocr.run(plan, log))
        attempt("orchestration", lambda: orchestration.run(plan, stack, log))
        attempt("quotes", lambda: quotes.run(plan, stack, log))
        stack.stop_all()
        attempt("gpu", lambda: gpu.run(plan, log))
    cpu_ms = figures.get("orchestration", {}).get("cpu_ms_per_page", {}).get("median")
    attempt("projection", lambda: projection.run(cpu_ms))

    results = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": "smoke" if args.smoke else "full",
        "runs": runs,
        "seconds": time.monotonic() - started,
        "machine": machine(),
        "tools": {
            "pdftoppm": tool_version(["pdftoppm", "-v"]),
            "vllm_python": str(gpu.VLLM_PYTHON) if gpu.VLLM_PYTHON.exists() else None,
        },
        "commands": _commands(args.smoke, runs),
        "environment": {k: v for k, v in BENCH_ENV.items() if "SECRET" not in k},
        "figures": figures,
        "errors": errors,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    results_path = args.out / ("results.json" if args.out != ROOT else "bench/results.json")
    results_path.write_text(json.dumps(results, indent=1, default=str) + "\n")
    from bench.report import write_report

    write_report(results, args.out / "BENCHMARKS.md")
    shutil.rmtree(workdir, ignore_errors=True)
    log(f"wrote {args.out / 'BENCHMARKS.md'} and {results_path}")
    return 1 if errors else 0


def _commands(smoke: bool, runs: int) -> list[str]:
    flags = " --smoke" if smoke else ""
    return [
        "make bench",
        f".venv/bin/python -m bench.run --runs {runs}{flags}",
        "  (figure 3 inside it: .venv-vllm/bin/python -m bench.gpu_saturation ...)",
    ]


if __name__ == "__main__":
    sys.exit(main())
