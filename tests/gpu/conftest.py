"""Fixtures for the GPU engine tests, which run in .venv-vllm (see mk/gpu.mk).

Nothing here imports the web stack or the database: the GPU worker's
environment has neither.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import vllm_cpu_env

vllm_cpu_env.apply()

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
REDIS_URL = os.environ.get("PAGEMILL_TEST_GPU_REDIS_URL", "redis://127.0.0.1:6379/11")


@pytest.fixture(scope="session")
def redis_store() -> Iterator[Any]:
    import redis

    store = redis.Redis.from_url(REDIS_URL)
    try:
        store.ping()
    except redis.exceptions.ConnectionError as exc:
        pytest.fail(f"Redis is needed at {REDIS_URL} for the bridge tests: {exc}")
    yield store
    store.close()


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The planted tiny Llama (see gpu_tiny_model.py), built once per run."""
    from gpu_tiny_model import build_for_tests

    return build_for_tests(tmp_path_factory.mktemp("tiny-llama") / "target")


@pytest.fixture(scope="session")
def noisy_draft(tiny_model: Any) -> Path:
    from gpu_tiny_model import DRAFT_NOISE, make_noisy_draft

    return make_noisy_draft(
        tiny_model.path, tiny_model.path.parent / "draft", noise_std_ratio=DRAFT_NOISE
    )


@pytest.fixture(scope="session")
def tiny_glm_ocr(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The tiny GLM-OCR with its MTP layer (see tiny_glm_ocr.py), built once per run."""
    from tiny_glm_ocr import build_tiny_glm_ocr

    return build_tiny_glm_ocr(tmp_path_factory.mktemp("tiny-glm-ocr"))


class WorkerProcess:
    """One `celery worker` process, threads pool, on its own queue."""

    def __init__(self, process: subprocess.Popen[bytes], log: Path) -> None:
        self.process = process
        self.log = log

    def terminate(self) -> None:
        """SIGTERM: Celery's warm shutdown, as a container stop sends it."""
        self.process.send_signal(signal.SIGTERM)

    def wait(self, timeout_s: float) -> int:
        return self.process.wait(timeout=timeout_s)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


class CeleryHarness:
    """Workers of the test Celery app (gpu_celery_app) on a queue of their own."""

    def __init__(self, store: Any, workdir: Path) -> None:
        self.store = store
        self.run = f"pagemill-gpu-test-{uuid.uuid4().hex[:10]}"
        self.queue = self.run
        self.workdir = workdir
        self.workers: list[WorkerProcess] = []

    def start_worker(
        self, *, script: str, concurrency: int = 40, drain_s: float = 30.0
    ) -> WorkerProcess:
        env = dict(os.environ)
        env.update(
            PYTHONPATH=os.pathsep.join([str(REPO), str(HERE)]),
            PAGEMILL_TEST_REDIS_URL=REDIS_URL,
            PAGEMILL_TEST_QUEUE=self.queue,
            PAGEMILL_TEST_RUN=self.run,
            PAGEMILL_TEST_SCRIPT=script,
            PAGEMILL_TEST_DRAIN_S=str(drain_s),
            PAGEMILL_TEST_WEIGHTS=str(self.workdir),
        )
        log = self.workdir / f"worker-{len(self.workers)}.log"
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "gpu_celery_app",
            "worker",
            "--pool=threads",
            f"--concurrency={concurrency}",
            f"--queues={self.queue}",
            f"--hostname={self.run}-{len(self.workers)}@%h",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
            "--loglevel=INFO",
        ]
        with log.open("wb") as sink:
            process = subprocess.Popen(
                command, cwd=HERE, env=env, stdout=sink, stderr=subprocess.STDOUT
            )
        worker = WorkerProcess(process, log)
        self.workers.append(worker)
        return worker

    def close(self) -> None:
        for worker in self.workers:
            if worker.process.poll() is None:
                worker.process.kill()
                worker.process.wait(timeout=30)
        keys = list(self.store.scan_iter(f"{self.run}*"))
        if keys:
            self.store.delete(*keys)


@pytest.fixture
def celery_harness(redis_store: Any, tmp_path: Path) -> Iterator[CeleryHarness]:
    harness = CeleryHarness(redis_store, tmp_path)
    yield harness
    harness.close()
