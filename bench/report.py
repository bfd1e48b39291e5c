"""BENCHMARKS.md from results.json: machine, inputs, commands, each figure's
median, its target met or missed and by how much."""

from __future__ import annotations

from pathlib import Path
from statistics import median
from typing import Any

HEADER = """# Benchmarks

Written by `make bench` (`bench/run.py`); the raw numbers of every run are in
`bench/results.json`. Do not edit by hand: run `make bench` again.

The machines these run on are shared and noisy, so every speed figure is a
ratio against a reference measured in the same run, on the same machine, with
the same inputs, and each figure is the median over the runs (every run is in
the JSON). Memory and routing figures are absolute. `make test` runs all of
this once on tiny inputs (`tests/bench/`), which checks that every benchmark
runs and produces its numbers; it asserts no timings. Targets live here only.
"""


def write_report(results: dict[str, Any], path: Path) -> None:
    figures = results["figures"]
    lines = [HEADER]
    if results["mode"] == "smoke":
        lines.append("**Smoke run: tiny inputs, one run. These numbers mean nothing.**\n")
    lines += _machine(results)
    lines += _summary(figures)
    cores = int(results["machine"].get("cpus") or 2)
    for name, render in (
        ("orchestration", _orchestration),
        ("rendering", _rendering),
        ("saturation_vllm", _saturation),
        ("saturation_standin", _saturation),
        ("saturation_glm", _saturation),
        ("cpu_ocr", _cpu_ocr),
        ("memory_worker", _memory),
        ("routing", _routing),
        ("quotes", _quotes),
        ("projection", _projection),
    ):
        if name in figures:
            figure = figures[name]
            lines += _orchestration(figure, cores) if name == "orchestration" else render(figure)
    if results["errors"]:
        lines.append("## Benchmarks that failed in this run\n")
        for name, trace in results["errors"].items():
            last = trace.strip().splitlines()[-1]
            lines.append(f"- `{name}`: {last}")
        lines.append("")
    path.write_text("\n".join(lines).rstrip() + "\n")


def _machine(results: dict[str, Any]) -> list[str]:
    m = results["machine"]
    return [
        "## Machine and commands\n",
        f"- Run: {results['generated_at']}, {results['mode']} mode, {results['runs']} runs "
        f"a figure, {results['seconds'] / 60:.1f} minutes in all",
        f"- CPU: {m.get('cpu_model', '?')}, {m.get('cpus')} cores; memory {m.get('memory_gb')} GB; "
        f"load average at start {m.get('load_average_at_start')} (other work was running)",
        f"- {m.get('platform')}, Python {m.get('python')}; {results['tools'].get('pdftoppm')}",
        "- Services: Postgres 127.0.0.1:5432 (a database created and dropped by the run), "
        "Redis 127.0.0.1:6379 database 12 under a queue prefix of the run's own, "
        "SeaweedFS S3 on :8333 (a bucket of the run's own)",
        "- Commands:",
        *[f"  - `{command.strip()}`" for command in results["commands"]],
        "",
    ]


def _pct(margin: float) -> str:
    return f"{margin * 100:+.0f}%"


def _summary(figures: dict[str, Any]) -> list[str]:
    rows = ["## Summary\n", "| figure | median | target | verdict |", "| --- | --- | --- | --- |"]
    for name, fig in figures.items():
        if "skipped" in fig:
            rows.append(f"| {fig['title']} | skipped | | {fig['skipped']} |")
            continue
        if "target" not in fig:
            continue
        value = fig["ratio"]["median"] if "ratio" in fig else fig.get("worker_rss_growth", 0)
        if name == "memory_worker":
            rows.append(
                f"| {fig['title']}: prepare peak RSS | {fig['prepare_peak_rss_mb']:.0f} MB | "
                f"< 300 MB | {'met' if fig['prepare_peak_met'] else 'missed'} "
                f"({_pct(fig['prepare_peak_rss_mb'] / 300 - 1)}) |"
            )
            rows.append(
                f"| {fig['title']}: worker RSS growth | {value * 100:.1f}% | < 10% | "
                f"{_verdict(fig)} |"
            )
            continue
        comparison = ">=" if fig["higher_is_better"] else "<="
        rows.append(
            f"| {fig['title']} | {value:.3f}x | {comparison} {fig['target']}x | {_verdict(fig)} |"
        )
        if "batch_target" in fig:
            batch = fig["worker_batch_steady_mean"]["median"]
            rows.append(
                f"| {fig['title']}: sequences in the engine's batch, steady state (mean) | "
                f"{batch:.1f} of 32 | >= {fig['batch_target']} | "
                f"{'met' if fig['batch_met'] else 'missed'} |"
            )
        if "in_flight_target" in fig:
            in_flight = fig["worker_in_flight_steady_min"]["median"]
            rows.append(
                f"| {fig['title']}: pages in flight at the worker, steady state (min) | "
                f"{in_flight:.0f} (batch mean {fig['worker_batch_steady_mean']['median']:.1f}) | "
                f">= {fig['in_flight_target']} | "
                f"{'met' if fig['in_flight_met'] else 'missed'} |"
            )
    if "quotes" in figures:
        rows += _quote_summary(figures["quotes"])
    if "orchestration" in figures:
        orchestration = figures["orchestration"]
        cpu = orchestration["cpu_ms_per_page"]["median"]
        rows.append(f"| Service CPU per page (API + worker) | {cpu:.1f} ms | | reported |")
        rows += _service_cost_rows(orchestration)
    if "routing" in figures:
        r = figures["routing"]
        rows.append(
            f"| Routing: pages needing no OCR | {r['share_without_ocr'] * 100:.0f}% "
            f"({r['pages_without_ocr']} of {r['pages']}) | | reported |"
        )
    return [*rows, ""]


def _service_cost_rows(fig: dict[str, Any]) -> list[str]:
    if "roundtrips_per_page" not in fig:
        return []
    cpu = fig["service_cpu_ms_per_page"]["median"]
    trips = fig["roundtrips_per_page"]["median"]
    return [
        f"| Service CPU per page without rendering and the engine | {cpu:.1f} ms "
        f"({trips:.1f} Postgres round trips a page) | <= {fig['service_cpu_target_ms']:.0f} ms "
        f"| {'met' if fig['service_cpu_met'] else 'missed'} |",
        f"| Postgres round trips per page, OCR path | {trips:.1f} | "
        f"<= {fig['roundtrips_target']:.0f} | {'met' if fig['roundtrips_met'] else 'missed'} |",
    ]


def _service_cost_lines(fig: dict[str, Any]) -> list[str]:
    if "roundtrips_per_page" not in fig:
        return []
    by_stage = ", ".join(
        f"{stage} {value['median']:.2f}"
        for stage, value in fig["roundtrips_per_page_by_stage"].items()
    )
    steps = ", ".join(
        f"{step.replace('|', ' ')} {value:.2f}"
        for step, value in fig["roundtrips_per_page_by_step"].items()
        if value >= 0.005
    )
    task_cpu = ", ".join(
        f"{stage} {value['median']:.1f}"
        for stage, value in fig["task_cpu_ms_per_page_by_stage"].items()
    )
    return [
        "- Service CPU per page without rendering and the engine (API and worker process "
        f"trees, the render children left out): {_runs(fig['service_cpu_ms_per_page'], 1)} "
        f"ms; target <= {fig['service_cpu_target_ms']:.0f} ms: "
        f"{'met' if fig['service_cpu_met'] else 'missed'}",
        f"- Postgres round trips per page, every page on the OCR path: "
        f"{_runs(fig['roundtrips_per_page'], 2)}; target <= {fig['roundtrips_target']:.0f}: "
        f"{'met' if fig['roundtrips_met'] else 'missed'}. Counted in the processes "
        "(bench/roundtrips.py): each statement, BEGIN, COMMIT or ROLLBACK and pool ping",
        f"- Round trips per page by stage (medians): {by_stage}",
        f"- By step (stage, then the code that opened the transaction): {steps}",
        f"- CPU ms per page in the worker's pool children by task (medians): {task_cpu}",
        "- The host's speed, measured in the same runs: a no-op Celery task cost "
        f"{_runs(fig['reference_cpu_ms_per_task'], 2)} ms of its worker's CPU, so the "
        "service's CPU per page above is "
        f"{_runs(fig['service_cpu_in_reference_tasks'], 1)} no-op tasks' worth",
    ]


def _verdict(fig: dict[str, Any]) -> str:
    word = "met" if fig["met"] else "missed"
    return f"{word} ({_pct(fig['margin'])} against the target)"


def _runs(summary: dict[str, Any], digits: int = 2) -> str:
    values = ", ".join(f"{v:.{digits}f}" for v in summary["runs"])
    return f"{summary['median']:.{digits}f} (runs: {values})"


def _common(fig: dict[str, Any]) -> list[str]:
    lines = [f"## {fig['title']}\n"]
    for key, label in (
        ("service", "Service"),
        ("reference", "Reference"),
        ("inputs", "Inputs"),
        ("workers", "Processes"),
    ):
        if key in fig:
            lines.append(f"- {label}: {fig[key]}")
    if "ratio" in fig:
        lines += [
            f"- Service: {_runs(fig['service_pages_per_s'])} pages/s",
            f"- Reference: {_runs(fig['reference_pages_per_s'])} pages/s",
            f"- **Ratio: {_runs(fig['ratio'], 3)}**; target "
            f"{'>=' if fig['higher_is_better'] else '<='} {fig['target']}: {_verdict(fig)}",
        ]
    return lines


def _orchestration(fig: dict[str, Any], cores: int = 2) -> list[str]:
    cpu = fig["cpu_ms_per_page"]["median"]
    render = fig["render_ms_per_page"]["median"]
    reference = fig["reference_pages_per_s"]["median"]
    lines = [
        *_common(fig),
        f"- Service CPU per page, API and worker processes together (psutil, children "
        f"included): {_runs(fig['cpu_ms_per_page'], 1)} ms; of it, rendering in prepare's "
        f"child (mean over all pages so far, wall clock): "
        f"{_runs(fig['render_ms_per_page'], 1)} ms",
    ]
    if "orientation_ms_per_page" in fig:
        lines.append(
            "- Of it too, finding which way up each page is before OCR (CPU, as the pages "
            f"record it): {_runs(fig['orientation_ms_per_page'], 1)} ms; share of pages "
            "whose text layer told it, with no pixels looked at: "
            f"{_runs(fig['orientation_by_text_layer_share'], 2)}"
        )
    by_process = fig.get("cpu_ms_per_page_by_process", {})
    if by_process:
        parts = ", ".join(
            f"{role} {value['median']:.1f}"
            for role, value in sorted(by_process.items(), key=lambda item: -item[1]["median"])
        )
        lines.append(f"- CPU ms a page by process (medians): {parts}")
    lines += _service_cost_lines(fig)
    if not fig["met"]:
        lines.append(
            f"- Why: the service is CPU-bound, not orchestration-bound. At {cpu:.0f} ms of CPU "
            f"a page, {cores} cores cap it at {cores * 1000 / cpu:.1f} pages/s however the "
            f"tasks are scheduled; rendering the 150 dpi page image alone is {render:.0f} ms "
            f"of that. Half the no-op rate ({reference / 2:.0f} pages/s) would need under "
            f"{cores * 1000 / (reference / 2):.1f} ms of CPU a page, rendering included."
        )
    return [*lines, ""]


def _rendering(fig: dict[str, Any]) -> list[str]:
    against_rgb = _runs(fig.get("ratio_against_rgb_reference", fig["ratio"]), 3)
    return [
        *_common(fig),
        f"- Rendering alone (no upload): {_runs(fig['service_render_only_pages_per_s'])} "
        f"pages/s, ratio {_runs(fig['ratio_render_only'], 3)}",
        *_render_ms_lines(fig),
        "- Both write PNG; PyMuPDF renders and OpenCV's libpng encodes in-process, pdftoppm "
        "is one process for the whole document, so neither side pays a start-up per page. "
        "The service "
        f"stored {fig.get('service_grey_pages', 0)} of the pages as one grey channel (pages "
        "without colour); the reference is run like for like, and against plain "
        f"`pdftoppm -png` (RGB) the ratio is {against_rgb}.",
        "",
    ]


def _render_ms_lines(fig: dict[str, Any]) -> list[str]:
    if "service_render_encode_ms_per_page" not in fig:
        return []
    return [
        "- Render+encode a page: "
        f"{_runs(fig['service_render_encode_ms_per_page'], 1)} ms (with the upload to S3: "
        f"{_runs(fig['service_render_encode_upload_ms_per_page'], 1)} ms); pdftoppm "
        f"{_runs(fig['reference_render_encode_ms_per_page'], 1)} ms"
    ]


def _saturation(fig: dict[str, Any]) -> list[str]:
    if "skipped" in fig:
        return [f"## {fig['title']}\n", f"Skipped: {fig['skipped']}.", ""]
    direct = fig["reference_pages_per_s"]["median"]
    worker = fig["service_pages_per_s"]["median"]
    lines = [
        *_common(fig),
        f"- Pages in flight at the worker's bridge, steady state: mean "
        f"{_runs(fig['worker_in_flight_steady_mean'], 1)}, minimum "
        f"{_runs(fig['worker_in_flight_steady_min'], 0)}",
        "- Pages in flight over the middle run, each tenth of it (worker / direct): "
        f"{fig['worker_in_flight_over_time']} / {fig['direct_in_flight_over_time']}",
    ]
    if "batch_target" in fig:
        lines.append(
            f"- Target: the engine's batch holds >= {fig['batch_target']} of 32 sequences on "
            f"the mean, steady state, fed by the worker: "
            f"{'met' if fig['batch_met'] else 'missed'}"
        )
    if "in_flight_target" in fig:
        lines.append(
            f"- Target: the worker keeps >= {fig['in_flight_target']} pages in flight "
            f"(minimum at the bridge, steady state, above): "
            f"{'met' if fig['in_flight_met'] else 'missed'}"
        )
    if "worker_batch_steady_mean" in fig:
        lines += [
            f"- Sequences in the engine's batch, steady state: mean "
            f"{_runs(fig['worker_batch_steady_mean'], 1)}, minimum "
            f"{_runs(fig['worker_batch_steady_min'], 0)} (driven directly: "
            + (
                f"mean {_runs(fig['direct_batch_steady_mean'], 1)}, "
                if "direct_batch_steady_mean" in fig
                else ""
            )
            + f"minimum {_runs(fig['direct_batch_steady_min'], 0)}): single steps right after many "
            "pages finished at once, before their replacements reached the engine, on both "
            "paths",
            f"- Batch over the middle run, each tenth: {fig['worker_batch_over_time']}",
        ]
    lines.append(
        "- Steady state: from the moment the bridge first held its most pages to the "
        "moment the last page entered the engine (ramp-up and tail left out)."
    )
    if not fig["met"] and "worker_batch_steady_mean" not in fig:
        direct_in_flight = median(
            [run["direct"]["steady"]["bridge_mean"] for run in fig.get("raw_runs", [])]
        )
        lines.append(
            f"- Why: the tiny model's pages are about 20 tokens, so the engine runs "
            f"{direct:.0f} pages/s direct, {direct / 2.57:.0f} times jina-ocr-v1's 2.57 "
            f"pages/s on an A100. At that rate what Celery does for each message (fetch it "
            f"from Redis, hand it to a thread, ack it), in the same process and under the same "
            f"interpreter lock as the engine's event loop, becomes the limit: one page every "
            f"{1000 / worker:.1f} ms. The pages in flight show it: the worker's threads held "
            f"{fig['worker_in_flight_steady_mean']['median']:.1f} on the mean in the steady "
            f"state, against {direct_in_flight:.1f} driven directly, because new messages "
            "did not reach the threads as fast as the engine finished pages. The stand-in "
            "below, at GPU-like page times, is the saturation figure for a GPU worker."
        )
    if fig.get("note"):
        lines.append(f"- Note: {fig['note']}")
    if fig.get("predicts"):
        lines.append(f"- What it predicts for a GPU: {fig['predicts']}")
    return [*lines, ""]


def _cpu_ocr(fig: dict[str, Any]) -> list[str]:
    if "cpu_ratio_to_previous" not in fig:
        return [*_common(fig), ""]
    ratio = fig["cpu_ratio_to_previous"]["median"]
    return [
        *_common(fig),
        f"- CPU per page: {fig['cpu_s_per_page']['median']:.2f} s, against "
        f"{fig['previous_cpu_s_per_page']['median']:.2f} s on the previous path "
        f"(pymupdf4llm's OCR and layout): **{ratio:.2f}x**; target <= "
        f"{fig['cpu_ratio_target']}x: {'met' if fig['cpu_ratio_met'] else 'missed'}",
        "",
    ]


def _memory(fig: dict[str, Any]) -> list[str]:
    peak = fig["prepare_peak_rss_mb"]
    own = fig["render_child_peak_rss_mb"] + max(
        0.0, fig["prepare_parent_peak_rss_mb"] - fig["pool_child_rss_before_mb"]
    )
    why = (
        []
        if fig["prepare_peak_met"]
        else [
            f"- Why: what prepare itself adds, the render child plus the pool child's growth "
            f"during the job, is {own:.0f} MB; the rest is the pool child's libraries, there "
            "before the job starts."
        ]
    )
    return [
        f"## {fig['title']}\n",
        f"- Inputs: {fig['inputs']}; {fig['pages']} pages in {fig['wall_s']:.0f} s",
        f"- Peak RSS of prepare: **{peak:.0f} MB** ({fig['prepare_peak_how']}); target < 300 MB: "
        f"{'met' if fig['prepare_peak_met'] else 'missed'} ({_pct(peak / 300 - 1)})",
        f"- Of which: render child {fig['render_child_peak_rss_mb']:.0f} MB, the pool child "
        f"running prepare {fig['prepare_parent_peak_rss_mb']:.0f} MB (a pool child held "
        f"{fig['pool_child_rss_before_mb']:.0f} MB before the job: Celery, the database and "
        "S3 clients and what every task of the worker loads)",
        f"- Worker RSS (both workers: parents and pool children) before / after: "
        f"{fig['worker_rss_before_mb']:.0f} / {fig['worker_rss_after_mb']:.0f} MB, growth "
        f"**{fig['worker_rss_growth'] * 100:.1f}%**; target < 10%: {_verdict(fig)}",
        *why,
        "",
    ]


def _routing(fig: dict[str, Any]) -> list[str]:
    lines = [
        f"## {fig['title']}\n",
        f"- Inputs: {fig['inputs']}",
        f"- Pages that needed no OCR (`auto` chose the text layer): **{fig['pages_without_ocr']} "
        f"of {fig['pages']} ({fig['share_without_ocr'] * 100:.0f}%)**",
        f"- GPU time saved at {fig['gpu_seconds_per_page']:.2f} GPU-s a page (jina-ocr-v1, "
        f"2.57 pages/s on an A100): {fig['gpu_seconds_saved']:.1f} GPU-s on this corpus, "
        f"{fig['gpu_seconds_saved_per_1000_pages']:.0f} GPU-s per 1,000 pages of this mix",
        "",
        "| page | engine | why |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {p['page']} | {p['engine']} | {p['reason']} |" for p in fig["per_page"]]
    return [*lines, ""]


def _quote_summary(fig: dict[str, Any]) -> list[str]:
    batch, job = fig["batch_abs_error_median"], fig["job_abs_error_max"]
    median = fig["job_abs_error_median"]
    return [
        f"| {fig['title']}: batch | {batch * 100:.1f}% off | within "
        f"{fig['batch_target'] * 100:.0f}% | {'met' if fig['batch_met'] else 'missed'} |",
        f"| {fig['title']}: single jobs | {fig['jobs_within_target']} of {fig['jobs']} "
        f"within {fig['job_target'] * 100:.0f}% (median {median * 100:.1f}%, worst "
        f"{job * 100:.1f}% off) | {_job_share(fig) * 100:.0f}% of jobs within "
        f"{fig['job_target'] * 100:.0f}% | {'met' if fig['job_met'] else 'missed'} |",
    ]


def _job_share(fig: dict[str, Any]) -> float:
    # Results written before the share was a target asked every job to be within.
    return float(fig.get("job_share_target", 1.0))


def _quotes(fig: dict[str, Any]) -> list[str]:
    runs = ", ".join(f"{error * 100:+.1f}%" for error in fig["batch_error"]["runs"])
    lines = [
        f"## {fig['title']}\n",
        f"- Inputs: {fig['inputs']}",
        f"- Processes: {fig['workers']}",
        "- History: a warm-up pass over the corpus (forgotten: it loads the models), then "
        f"{fig.get('history_passes', 1)} passes not measured; each run then submits every "
        "document once, and the next run's quotes include it",
        f"- Batch: quote / actual - 1 in each of {fig['runs']} runs: {runs}; **median "
        f"{fig['batch_abs_error_median'] * 100:.1f}% off**, target within "
        f"{fig['batch_target'] * 100:.0f}%: {'met' if fig['batch_met'] else 'missed'}",
        f"- Single jobs (each document's median over the runs): median "
        f"{fig['job_abs_error_median'] * 100:.1f}% off, **worst "
        f"{fig['job_abs_error_max'] * 100:.1f}% off**; {fig['jobs_within_target']} of "
        f"{fig['jobs']} within {fig['job_target'] * 100:.0f}% (target: at least "
        f"{_job_share(fig) * 100:.0f}% of jobs): {'met' if fig['job_met'] else 'missed'}",
    ]
    if fig["failed_jobs"]:
        lines.append(f"- Jobs that did not succeed (left out): {', '.join(fig['failed_jobs'])}")
    lines += [
        "",
        "| document | pages | quote $ | actual $ (last run) | error (median of runs) "
        "| error in each run |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for job in fig["per_job"]:
        error = job["error_median"]
        shown = f"{error * 100:+.0f}%" if error is not None else "-"
        each = ", ".join(f"{run * 100:+.0f}%" for run in job.get("errors", []))
        lines.append(
            f"| {job['document']} | {job['pages']} | {job['quote_usd']} | {job['cost_usd']} | "
            f"{shown} | {each or '-'} |"
        )
    return [*lines, ""]


def _projection(fig: dict[str, Any]) -> list[str]:
    cpu = fig["service_cpu_ms_per_page"]
    lines = [
        f"## {fig['title']}\n",
        f"- Inputs: {fig['inputs']}. Service CPU per page: "
        + (f"{cpu:.1f} ms (measured above)." if cpu is not None else "not measured."),
        "- The L4 rows divide the published single-stream decode speed by 1,085 tokens a "
        "page: a floor for one sequence, not a batched throughput (none is published for "
        "the L4).",
        "",
        "| model | GPU | basis | pages/s | host cores needed | $/h | $ per 1,000 pages | "
        "GPU-s/page |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in fig["rows"]:
        lines.append(
            f"| {row['model']} | {row['gpu']} | {row['basis']} | {row['pages_per_s']:.3f} | "
            f"{row['host_cores_needed']:.2f} of {row['host_cores_assumed']:.0f} | "
            f"{row['price_usd_per_hour']:.2f} | {row['usd_per_1000_pages']:.3f} | "
            f"{row['gpu_seconds_per_page']:.2f} |"
        )
    lines += [
        "",
        "Prices and host cores are inputs: PAGEMILL_BENCH_PRICE_L4, PAGEMILL_BENCH_PRICE_A100 "
        "($ an hour), PAGEMILL_BENCH_CORES_L4, PAGEMILL_BENCH_CORES_A100.",
        "",
    ]
    return lines


if __name__ == "__main__":
    # Rewrite the report from saved results: python -m bench.report RESULTS.json OUT.md
    import json
    import sys

    write_report(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]))
