"""Figure 7 (quotes): the quote given at submit against the cost the job then
recorded, per job and per batch, on a mixed corpus of born-digital and scanned
documents run through the real engines (`auto`: text layer or rapidocr).

A quote prices each page by the engine it will most likely be routed to and by how
much the page holds, from that engine's recent pages (pagemill.accounting.quote), so
it needs history. A first pass over the
corpus warms the worker (its first pages load the engines' models, which a running
service has long done) and is then forgotten; HISTORY_PASSES more, not measured, stand
for the traffic a running service has seen. The API keeps each engine's fitted model for
PAGEMILL_QUOTE_MODEL_TTL_S (10 s by default); every pass takes longer than that, so each
measured run is quoted from every page read before it.
Each measured run then submits every document once as a batch. A job's error is
quote / actual - 1; the batch's is the sum of the quotes against the sum of the
actual costs. Costs are device seconds (CPU time here) at the configured price, so
the figures are ratios that the price does not change.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from bench.common import ROOT, Plan, make_text_pdf, median, summary
from bench.orchestration import _wait_for_jobs
from bench.stack import BENCH_ENV, Stack

DOCUMENT_SUFFIXES = {".pdf", ".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp"}
BATCH_TARGET = 0.10  # the batch's quote within 10 % of its cost
JOB_TARGET = 0.25  # a single job's quote within 25 % of its cost ...
# ... for every job. The share within it is reported too: a quote is made before any
# engine has run, and some documents cost what nothing measured at submit can tell.
JOB_SHARE_TARGET = 1.0
WORKER_CONCURRENCY = 2
# Passes over the corpus before the measured runs, standing for the traffic a running
# service has seen. One leaves 7 pages read by OCR (the corpus's scans and photos), fewer
# than a cost model is fitted on (pagemill.accounting.cost_model MIN_FIT_PAGES): the first
# run's scans would all be priced at OCR's mean page, as a new deployment's are.
HISTORY_PASSES = 2


def corpus() -> list[Path]:
    """Every document of the shared corpus (when present), samples/ and the test
    fixtures, each once: born-digital PDFs, image-only PDFs and images."""
    folders = [ROOT.parent / "shared/corpus", ROOT / "samples", ROOT / "tests/fixtures/corpus"]
    files, seen = [], set()
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*")):
            if path.suffix.lower() not in DOCUMENT_SUFFIXES or not path.is_file():
                continue
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest not in seen:
                seen.add(digest)
                files.append(path)
    return files


def smoke_corpus(workdir: Path) -> list[Path]:
    """One born-digital page and one scanned page: enough to prove the figure runs."""
    return [
        make_text_pdf(workdir / "quote-text.pdf", 1, lines=8),
        ROOT / "samples/scanned-sentence.pdf",
    ]


def run(plan: Plan, stack: Stack, log: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    files = smoke_corpus(plan.workdir) if plan.smoke else corpus()
    # Whatever earlier figures left (pages of the instant engine, which cost nothing)
    # would count as history.
    stack.stop_all()
    _forget_history()
    stack.start_api()
    stack.start_worker(
        "quote-worker",
        "worker.celery_app",
        stack.queues("prepare", "ocr", "finalize"),
        WORKER_CONCURRENCY,
    )
    with httpx.Client(
        base_url=stack.api_url, headers={"Authorization": f"Bearer {stack.api_key}"}, timeout=300
    ) as client:
        if not plan.smoke:  # the smoke run's one batch is quoted from the fallback
            _run_batch(client, files)  # warm-up
            _forget_history()
            for _ in range(HISTORY_PASSES):
                _run_batch(client, files)  # history, not measured
        batches = []
        for index in range(min(plan.runs, 3)):
            batches.append(_run_batch(client, files))
            log(f"  quotes run {index + 1}: batch error {_batch_error(batches[-1]):+.1%}")
    stack.stop_all()
    return {"quotes": _figure(files, batches)}


def _forget_history() -> None:
    import psycopg

    url = BENCH_ENV["PAGEMILL_DATABASE_URL"].replace("+psycopg", "")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE jobs, pages CASCADE")


def _run_batch(client: httpx.Client, files: list[Path]) -> list[dict[str, Any]]:
    """Submit every file as its own job (engine auto); the quote and cost of each."""

    def submit(path: Path) -> tuple[str, Decimal]:
        response = client.post(
            "/v1/jobs",
            files={"file": (path.name, path.read_bytes())},
            # Every run sends the same files: each must run its engines to have a cost.
            data={"engine": "auto", "cache": "false"},
        )
        response.raise_for_status()
        return str(response.json()["id"]), Decimal(response.json()["quote_usd"])

    with ThreadPoolExecutor(max_workers=4) as pool:
        submitted = list(pool.map(submit, files))
    _wait_for_jobs([job_id for job_id, _ in submitted])
    jobs = []
    for path, (job_id, quote) in zip(files, submitted, strict=True):
        job = client.get(f"/v1/jobs/{job_id}").json()
        jobs.append(
            {
                "document": path.name,
                "status": job["status"],
                "pages": job["pages"]["total"],
                "quote_usd": quote,
                "cost_usd": Decimal(job["cost_usd"]),
            }
        )
    return jobs


def _succeeded(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [job for job in batch if job["status"] == "succeeded" and job["cost_usd"] > 0]


def _batch_error(batch: list[dict[str, Any]]) -> float:
    jobs = _succeeded(batch)
    quoted = sum((job["quote_usd"] for job in jobs), Decimal(0))
    actual = sum((job["cost_usd"] for job in jobs), Decimal(0))
    return float(quoted / actual - 1) if actual else float("nan")


def _figure(files: list[Path], batches: list[list[dict[str, Any]]]) -> dict[str, Any]:
    batch_errors = [_batch_error(batch) for batch in batches]
    # Each document's error in each run, then per document the median over the runs.
    by_document: dict[str, list[float]] = {}
    for batch in batches:
        for job in _succeeded(batch):
            error = float(job["quote_usd"] / job["cost_usd"] - 1)
            by_document.setdefault(job["document"], []).append(error)
    job_errors = {name: median(errors) for name, errors in by_document.items()}
    absolute = sorted(abs(error) for error in job_errors.values())
    within = sum(1 for error in absolute if error <= JOB_TARGET)
    batch_median = median([abs(error) for error in batch_errors])
    last = batches[-1]
    pages = sum(job["pages"] for job in last)
    return {
        "title": "Quote against actual cost",
        "unit": "quote / actual - 1",
        "inputs": f"{len(files)} documents, {pages} pages, engine=auto: "
        + ", ".join(sorted({_source(path) for path in files})),
        "workers": f"1 worker (queues prepare, ocr, finalize), prefork, concurrency "
        f"{WORKER_CONCURRENCY}, real engines (text layer, rapidocr); 1 API process",
        "runs": len(batches),
        "history_passes": HISTORY_PASSES,
        "batch_error": summary(batch_errors),
        "batch_abs_error_median": batch_median,
        "batch_target": BATCH_TARGET,
        "batch_met": bool(batch_median <= BATCH_TARGET),
        "job_abs_error_median": median(absolute),
        "job_abs_error_max": max(absolute) if absolute else float("nan"),
        "jobs_within_target": within,
        "jobs": len(absolute),
        "job_target": JOB_TARGET,
        "job_share_target": JOB_SHARE_TARGET,
        "job_met": bool(absolute) and within >= JOB_SHARE_TARGET * len(absolute),
        "failed_jobs": [job["document"] for job in last if job["status"] != "succeeded"],
        "per_job": [
            {
                "document": job["document"],
                "pages": job["pages"],
                "quote_usd": str(job["quote_usd"]),
                "cost_usd": str(job["cost_usd"]),
                "error_median": job_errors.get(job["document"]),
                "errors": by_document.get(job["document"], []),
            }
            for job in last
        ],
    }


def _source(path: Path) -> str:
    for marker in ("shared/corpus", "samples", "tests/fixtures/corpus"):
        if marker in str(path):
            return marker if marker != "shared/corpus" else "../shared/corpus"
    return str(path.parent)
