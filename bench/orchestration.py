"""Figure 1 (orchestration ceiling) and figure 5's worker figures (prepare's peak
memory in the real worker, worker memory growth over many pages).

The service: born-digital PDFs uploaded to the API, prepared, one `ocr` task a
page through the instant engine (bench/instant_app.py), finalized; pages/s from
the first upload to the last job's finish. The reference: plain no-op Celery
tasks (bench/noop_app.py), one a page, on the same Redis with the same worker
count and pool.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx

from bench import roundtrips
from bench.common import Plan, make_text_pdf, median, summary, verdict
from bench.stack import (
    BENCH_ENV,
    RUN_ID,
    Stack,
    cpu_seconds,
    cpu_seconds_by_role,
    is_sandbox_child,
    process_tree,
    rss_bytes,
)

WORKER_CONCURRENCY = 2
NOOP_COUNTER = f"pagemill-bench-{RUN_ID}-noop"
ROUNDTRIPS_KEY = f"pagemill-bench-{RUN_ID}-roundtrips"
# The stages a page's work runs in, as bench/roundtrips.py names them: the API's
# submission, then the worker's three tasks.
STAGES = ("api", "prepare", "ocr_page", "finalize")
ROUNDTRIPS_TARGET = 8.0  # per page on the OCR path (issue 21)
SERVICE_CPU_TARGET_MS = 10.0  # per page, rendering and the engine left out
# No-op tasks run to read a task's CPU: enough for the 10 ms clock the kernel counts
# process CPU in to resolve it to a few per cent (a small plan's run can count none).
NOOP_CPU_TASKS = 400


def run(plan: Plan, stack: Stack, log: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    jobs = plan.size(2, 8)
    pages_per_job = plan.size(3, 25)
    growth_pages = plan.size(20, 1000)

    os.environ["PAGEMILL_BENCH_NOOP_COUNTER"] = NOOP_COUNTER
    os.environ[roundtrips.KEY_ENV] = ROUNDTRIPS_KEY
    try:
        return _run(plan, stack, log, jobs, pages_per_job, growth_pages)
    finally:
        os.environ.pop(roundtrips.KEY_ENV, None)


def _run(
    plan: Plan,
    stack: Stack,
    log: Callable[[str], None],
    jobs: int,
    pages_per_job: int,
    growth_pages: int,
) -> dict[str, dict[str, Any]]:
    pdf = make_text_pdf(plan.workdir / "orchestration.pdf", pages_per_job).read_bytes()
    big_pdf = make_text_pdf(plan.workdir / "growth.pdf", growth_pages).read_bytes()
    _start_counted_api(stack)
    stages = stack.queues("prepare", "ocr", "finalize")
    worker = stack.start_worker("instant-worker", "bench.instant_app", stages, WORKER_CONCURRENCY)
    stack.start_worker("noop-worker", "bench.noop_app", stack.queues("noop"), WORKER_CONCURRENCY)
    api = stack.processes["api"]
    with httpx.Client(
        base_url=stack.api_url, headers={"Authorization": f"Bearer {stack.api_key}"}, timeout=120
    ) as client:
        # Warm-up, not measured: imports, connections, first-use paths.
        _run_jobs(client, pdf, 1)
        _run_noop(pages_per_job)

        service_rates, noop_rates, ratios, cpu_ms, render_ms = [], [], [], [], []
        orient_ms, told_by_text = [], []
        roles: dict[str, list[float]] = {}
        service_cpu_ms: list[float] = []
        # The no-op worker's CPU a task, measured in the same runs: how fast this host is,
        # to read the service's CPU against (it drifts by half between runs on a VM).
        noop_cpu_ms: list[float] = []
        counted_runs: list[_Counted] = []
        for index in range(plan.runs):
            cpu_before = cpu_seconds([api, worker])
            roles_before = cpu_seconds_by_role({"api": api, "worker": worker})
            _reset_counts()
            pages, wall = _run_jobs(client, pdf, jobs)
            cpu_used = cpu_seconds([api, worker]) - cpu_before
            counted_runs.append(_Counted.collect(pages, jobs))
            without_rendering = 0.0
            for role, used in cpu_seconds_by_role({"api": api, "worker": worker}).items():
                spent = used - roles_before.get(role, 0.0)
                roles.setdefault(role, []).append(spent * 1000 / pages)
                if role != "worker sandbox children":  # prepare's render children
                    without_rendering += spent * 1000 / pages
            service_cpu_ms.append(without_rendering)
            noop_pages, noop_wall = _run_noop(jobs * pages_per_job)
            noop_cpu_ms.append(_noop_cpu_ms_per_task(stack.processes["noop-worker"]))
            service_rates.append(pages / wall)
            noop_rates.append(noop_pages / noop_wall)
            ratios.append(service_rates[-1] / noop_rates[-1])
            cpu_ms.append(cpu_used * 1000 / pages)
            render_ms.append(_render_ms_per_page())
            orientation_ms, text_share = _orientation_per_page()
            orient_ms.append(orientation_ms)
            told_by_text.append(text_share)
            log(
                f"  orchestration run {index + 1}: service {service_rates[-1]:.1f} pages/s, "
                f"no-op Celery {noop_rates[-1]:.1f} tasks/s, {cpu_ms[-1]:.1f} CPU ms/page "
                f"({service_cpu_ms[-1]:.1f} without rendering), "
                f"{counted_runs[-1].total_per_page():.1f} Postgres round trips/page "
                f"{counted_runs[-1].per_page_by_stage()}"
            )
        stack.stop("noop-worker")

        # Figure 5, in real workers laid out as in production: prepare (and finalize)
        # on a CPU worker of their own, which loads no OCR engine, beside the OCR worker.
        stack.stop("instant-worker")
        preparer = stack.start_worker(
            "prepare-worker", "bench.instant_app", stack.queues("prepare", "finalize"), 1
        )
        reader = stack.start_worker(
            "ocr-worker", "bench.instant_app", stack.queues("ocr"), WORKER_CONCURRENCY
        )
        _run_jobs(client, pdf, 1)  # warm-up, not measured
        rss_before = rss_bytes(preparer) + rss_bytes(reader)
        pool_before = max(_pool_children_rss(preparer), default=0)
        sampler = _PrepareMemorySampler(preparer)
        sampler.start()
        try:
            growth_done, growth_wall = _run_jobs(client, big_pdf, 1)
        finally:
            sampler.stop()
        rss_after = rss_bytes(preparer) + rss_bytes(reader)

    ratio = median(ratios)
    growth = (rss_after - rss_before) / rss_before
    return {
        "orchestration": {
            "title": "Orchestration ceiling",
            "unit": "ratio of pages/s",
            "service": "API upload -> Redis -> Celery prepare/ocr/finalize -> S3 -> Postgres, "
            "instant engine",
            "reference": "no-op Celery tasks, one a page, same Redis, same worker count",
            "inputs": f"{jobs} jobs x {pages_per_job} born-digital A4 pages a run, "
            f"engine=rapidocr (instant: a 3,700-character invoice page of Markdown at once, "
            f"the model's average length), 150 dpi page images",
            "workers": f"1 worker, prefork, concurrency {WORKER_CONCURRENCY}; 1 API process",
            "ratio": summary(ratios),
            "service_pages_per_s": summary(service_rates),
            "reference_pages_per_s": summary(noop_rates),
            "cpu_ms_per_page": summary(cpu_ms),
            "cpu_ms_per_page_by_process": {role: summary(ms) for role, ms in roles.items()},
            "render_ms_per_page": summary(render_ms),
            "orientation_ms_per_page": summary(orient_ms),
            "orientation_by_text_layer_share": summary(told_by_text),
            **_service_cost(service_cpu_ms, counted_runs),
            "reference_cpu_ms_per_task": summary(noop_cpu_ms),
            "service_cpu_in_reference_tasks": summary(
                [service / noop for service, noop in zip(service_cpu_ms, noop_cpu_ms, strict=True)]
            ),
            **verdict(ratio, 0.5),
        },
        "memory_worker": {
            "title": "Memory in the worker",
            "unit": "MB and share",
            "inputs": f"one job of {growth_pages} born-digital pages: a prepare worker "
            "(queues prepare and finalize, concurrency 1, no OCR engine loaded) beside an OCR "
            f"worker (queue ocr, concurrency {WORKER_CONCURRENCY}, instant engine); worker RSS "
            "is both workers' process trees, sandbox children left out",
            "pages": growth_done,
            "wall_s": growth_wall,
            "prepare_peak_rss_mb": sampler.peak_bytes / 1e6,
            "prepare_peak_how": "VmHWM of the prepare pool child plus VmHWM of its render "
            "child, sampled every 50 ms while the job ran (the fork server the child "
            "comes from is left out: the child's resident set already counts the pages "
            "it shares with it)",
            "render_child_peak_rss_mb": sampler.child_peak_bytes / 1e6,
            "prepare_parent_peak_rss_mb": sampler.parent_peak_bytes / 1e6,
            "pool_child_rss_before_mb": pool_before / 1e6,
            "prepare_peak_target_mb": 300.0,
            "prepare_peak_met": sampler.peak_bytes / 1e6 < 300.0,
            "worker_rss_before_mb": rss_before / 1e6,
            "worker_rss_after_mb": rss_after / 1e6,
            "worker_rss_growth": growth,
            **verdict(growth, 0.10, higher_is_better=False),
        },
    }


def _start_counted_api(stack: Stack) -> None:
    """The real API, its Postgres round trips counted (bench/counted_api.py)."""
    from tests.support import services

    port = services.free_port()
    stack.api_url = f"http://127.0.0.1:{port}"
    log_path = stack.workdir / "api.log"
    env = {**os.environ, "PAGEMILL_API_BASE_URL": stack.api_url}
    stack.processes["api"] = roundtrips.launch_counted_api(env, log_path, port)
    services.wait_for_api(stack.processes["api"], log_path, port)


def _redis() -> Any:
    import redis

    return redis.Redis.from_url(BENCH_ENV["PAGEMILL_BROKER_URL"])


def _reset_counts() -> None:
    # The work before this run adds its last counts within a flush period: let it, then
    # start from zero.
    time.sleep(2 * roundtrips.FLUSH_PERIOD_S)
    roundtrips.reset(_redis())


@dataclass(frozen=True)
class _Counted:
    """One run's round trips and worker CPU, as the processes counted them."""

    pages: int
    counts: dict[str, int]

    @classmethod
    def collect(cls, pages: int, jobs: int) -> _Counted:
        # Each process adds its counts within a flush period of a task's end; the job's
        # finish is recorded a moment before its finalize task ends. Once every finalize
        # is counted, one more period lets the other processes' last counts arrive.
        client = _redis()
        deadline = time.monotonic() + 10
        counts = roundtrips.read(client)
        while counts.get("runs|finalize", 0) < jobs and time.monotonic() < deadline:
            time.sleep(0.05)
            counts = roundtrips.read(client)
        time.sleep(2 * roundtrips.FLUSH_PERIOD_S)
        return cls(pages, roundtrips.read(client))

    def per_page_by_stage(self) -> dict[str, float]:
        totals = dict.fromkeys(STAGES, 0.0)
        for field, value in self.counts.items():
            kind, _, rest = field.partition("|")
            stage = rest.split("|", 1)[0]
            if kind == "rt" and stage in totals:
                totals[stage] += value / self.pages
        return {stage: round(value, 2) for stage, value in totals.items()}

    def per_page_by_step(self) -> dict[str, float]:
        steps: dict[str, float] = {}
        for field, value in self.counts.items():
            kind, _, rest = field.partition("|")
            if kind == "rt":
                steps[rest] = steps.get(rest, 0.0) + value / self.pages
        return steps

    def total_per_page(self) -> float:
        return sum(self.per_page_by_stage().values())

    def cpu_ms_per_page_by_stage(self) -> dict[str, float]:
        return {
            stage: self.counts.get(f"cpu_us|{stage}", 0) / 1000 / self.pages
            for stage in STAGES
            if f"cpu_us|{stage}" in self.counts
        }


def _service_cost(service_cpu_ms: list[float], runs: list[_Counted]) -> dict[str, Any]:
    stages: dict[str, list[float]] = {}
    steps: dict[str, list[float]] = {}
    cpu_by_stage: dict[str, list[float]] = {}
    for run in runs:
        for stage, value in run.per_page_by_stage().items():
            stages.setdefault(stage, []).append(value)
        for step, value in run.per_page_by_step().items():
            steps.setdefault(step, []).append(value)
        for stage, value in run.cpu_ms_per_page_by_stage().items():
            cpu_by_stage.setdefault(stage, []).append(value)
    round_trips = median([run.total_per_page() for run in runs])
    service_cpu = median(service_cpu_ms)
    return {
        "service_cpu_ms_per_page": summary(service_cpu_ms),
        "service_cpu_how": "CPU of the API and worker process trees less the worker's "
        "sandbox children, which render the pages (psutil); the instant engine's share is nil, "
        "and its pages are as long as the model's (bench/instant_app.py)",
        "service_cpu_target_ms": SERVICE_CPU_TARGET_MS,
        "service_cpu_met": service_cpu <= SERVICE_CPU_TARGET_MS,
        "task_cpu_ms_per_page_by_stage": {k: summary(v) for k, v in cpu_by_stage.items()},
        "roundtrips_per_page": summary([run.total_per_page() for run in runs]),
        "roundtrips_per_page_by_stage": {k: summary(v) for k, v in stages.items()},
        "roundtrips_per_page_by_step": {k: median(v) for k, v in sorted(steps.items())},
        "roundtrips_how": "counted in the API and worker processes (bench/roundtrips.py): "
        "statements, BEGIN, COMMIT/ROLLBACK and pool pings, per page of the run",
        "roundtrips_target": ROUNDTRIPS_TARGET,
        "roundtrips_met": round_trips <= ROUNDTRIPS_TARGET,
    }


def _run_jobs(client: httpx.Client, pdf: bytes, count: int) -> tuple[int, float]:
    """Submit `count` jobs; returns (pages done, seconds from first upload to last finish)."""
    started = time.time()

    def submit(index: int) -> str:
        # Bytes of its own for every job: the same document sent again is answered from
        # the result cache (pagemill.jobs.result_cache), and no page would be processed.
        unique = pdf + f"\n%pagemill-bench {uuid.uuid4().hex}\n".encode()
        response = client.post(
            "/v1/jobs",
            files={"file": (f"bench-{index}.pdf", unique, "application/pdf")},
            data={"engine": "rapidocr"},
        )
        response.raise_for_status()
        return str(response.json()["id"])

    with ThreadPoolExecutor(max_workers=4) as pool:
        ids = list(pool.map(submit, range(count)))
    rows = _wait_for_jobs(ids)
    failed = [row for row in rows if row[1] != "succeeded"]
    if failed:
        raise RuntimeError(f"benchmark jobs did not succeed: {failed}")
    finished = max(row[2] for row in rows)
    return sum(row[3] for row in rows), finished.timestamp() - started


def _wait_for_jobs(ids: list[str], timeout_s: float = 1800) -> list[Any]:
    import psycopg

    url = BENCH_ENV["PAGEMILL_DATABASE_URL"].replace("+psycopg", "")
    deadline = time.monotonic() + timeout_s
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            rows = conn.execute(
                "SELECT id, status::text, finished_at, pages_total FROM jobs "
                "WHERE id = ANY(%s::uuid[]) AND finished_at IS NOT NULL",
                (ids,),
            ).fetchall()
            if len(rows) == len(ids):
                return rows
            time.sleep(0.05)
    raise TimeoutError(f"benchmark jobs unfinished after {timeout_s} s")


def _render_ms_per_page() -> float:
    """Mean time prepare's render child spent on a page (the pages table records it)."""
    import psycopg

    url = BENCH_ENV["PAGEMILL_DATABASE_URL"].replace("+psycopg", "")
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT avg(render_seconds) FROM pages").fetchone()
    return float(row[0] or 0) * 1000 if row else 0.0


def _orientation_per_page() -> tuple[float, float]:
    """Mean CPU ms finding which way up a page is, as each page's engine details record
    it, and the share of pages whose text layer told (`worker.orientation.from_text_layer`:
    no pixels looked at)."""
    import psycopg

    url = BENCH_ENV["PAGEMILL_DATABASE_URL"].replace("+psycopg", "")
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT avg(coalesce((engine_details->'orientation'->>'cpu_seconds')::float, 0)), "
            "avg((engine_details->'orientation'->>'decided_by' = 'text layer')::int) "
            "FROM pages"
        ).fetchone()
    if row is None:
        return 0.0, 0.0
    return float(row[0] or 0) * 1000, float(row[1] or 0)


def _pool_children_rss(worker: Any) -> list[int]:
    import psutil

    sizes = []
    for proc in psutil.Process(worker.pid).children():
        try:
            sizes.append(proc.memory_info().rss)
        except psutil.NoSuchProcess:
            continue
    return sizes


def _noop_cpu_ms_per_task(worker: Any) -> float:
    """The no-op worker's CPU (its process tree's) per task, over NOOP_CPU_TASKS tasks."""
    before = cpu_seconds([worker])
    tasks, _ = _run_noop(NOOP_CPU_TASKS)
    return (cpu_seconds([worker]) - before) * 1000 / tasks


def _run_noop(count: int) -> tuple[int, float]:
    import redis

    from bench.noop_app import NOOP_TASK, app
    from pagemill.settings import get_settings

    counter = redis.Redis.from_url(BENCH_ENV["PAGEMILL_BROKER_URL"])
    counter.delete(NOOP_COUNTER)
    queue = get_settings().queue("noop")
    started = time.time()
    for number in range(count):
        app.send_task(NOOP_TASK, args=[number], queue=queue)
    deadline = time.monotonic() + 600
    while int(cast(bytes | None, counter.get(NOOP_COUNTER)) or 0) < count:
        if time.monotonic() > deadline:
            raise TimeoutError("no-op tasks did not finish")
        time.sleep(0.002)
    return count, time.time() - started


class _PrepareMemorySampler:
    """Peak resident memory of prepare: the pool child running it plus its
    sandboxed render child, from the kernel's high-water marks (VmHWM)."""

    def __init__(self, worker: Any) -> None:
        self.worker = worker
        self.peak_bytes = 0
        self.child_peak_bytes = 0
        self.parent_peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        import psutil

        while not self._stop.is_set():
            for proc in process_tree(self.worker):
                try:
                    if not is_sandbox_child(proc):
                        continue
                    # child <- fork server <- the pool child running prepare
                    server = proc.parent()
                    parent = server.parent() if server else None
                    child = _hwm_bytes(proc.pid)
                    owner = _hwm_bytes(parent.pid) if parent else 0
                except (psutil.NoSuchProcess, OSError):
                    continue
                self.child_peak_bytes = max(self.child_peak_bytes, child)
                self.parent_peak_bytes = max(self.parent_peak_bytes, owner)
                self.peak_bytes = max(self.peak_bytes, child + owner)
            self._stop.wait(0.05)


def _hwm_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0
