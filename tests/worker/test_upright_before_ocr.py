"""Pages are turned upright before OCR: in the shared quality stage, through the real
worker, and in `pagemill convert`; blank and text layer pages skip detection."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pymupdf
from PIL import Image
from rapidocr import RapidOCR

from pagemill.domain import SourceKind
from pagemill.storage import JobKeys, ObjectStore
from tests.conftest import SAMPLES, wait_for_job
from tests.support.services import ROOT
from tests.worker.test_router_and_engines import SENTENCE, SENTENCE_CER_MAX, cer
from worker.engines.base import EngineResult, PageInput
from worker.engines.registry import get_engine
from worker.engines.vllm.inputs import build_prompt
from worker.engines.vllm.profiles import get_profile
from worker.render import render_pages
from worker.stages.quality import convert_checked

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"
# A scan fed in sideways: its page shows the sentence running up the page (/Rotate 270).
SIDEWAYS_SCAN = CORPUS / "ocr_test_rotated_90.pdf"


def page_input(path: Path, number: int = 1) -> PageInput:
    kind = SourceKind.pdf if path.suffix == ".pdf" else SourceKind.png
    page = next(iter(render_pages(path, kind, [number], 150, 40_000_000)))
    return PageInput(page.facts, page.image_png, page.image_dpi, page.pdf_page)


def convert(engine: str, page: PageInput) -> EngineResult:
    return get_engine(engine).convert(page)


def orientation_entries(checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [check for check in checks if check["name"] == "orientation"]


def test_a_sideways_scan_is_turned_upright_before_ocr_and_reads() -> None:
    assessed = convert_checked("rapidocr", page_input(SIDEWAYS_SCAN), convert, "rapidocr")
    assert cer(assessed.result.markdown, SENTENCE) <= SENTENCE_CER_MAX
    details = assessed.result.details["orientation"]
    assert details["rotation"] == 90
    # Detection's CPU time is charged with the page.
    assert assessed.result.device_seconds > details["cpu_seconds"] > 0
    [entry] = orientation_entries(assessed.columns()["quality_checks"])
    assert entry["rotation"] == 90 and entry["passed"] is True
    assert entry["detail"].startswith("turned 90 degrees clockwise before reading")
    assert (assessed.verdict, assessed.repair) == ("ok", None)


def test_an_upright_scan_is_read_as_it_is_and_says_so() -> None:
    assessed = convert_checked("rapidocr", page_input(CORPUS / "ocr_test.pdf"), convert, "rapidocr")
    assert cer(assessed.result.markdown, SENTENCE) <= SENTENCE_CER_MAX
    [entry] = orientation_entries(assessed.columns()["quality_checks"])
    assert entry["rotation"] == 0 and entry["detail"].startswith("upright")


def test_blank_and_text_layer_pages_skip_detection(tmp_path: Path) -> None:
    document = pymupdf.open()
    document.new_page(width=595, height=842)
    document.save(tmp_path / "blank.pdf")
    blank = convert_checked("rapidocr", page_input(tmp_path / "blank.pdf"), convert, "rapidocr")
    assert blank.blank is True and blank.orientation is None
    assert "orientation" not in blank.result.details
    assert orientation_entries(blank.columns()["quality_checks"]) == []
    assert blank.result.device_seconds == 0.0

    text_layer = page_input(SAMPLES / "invoice-multipage.pdf", 2)
    born_digital = convert_checked("textlayer", text_layer, convert, "rapidocr")
    assert born_digital.engine == "textlayer" and born_digital.orientation is None
    assert "orientation" not in born_digital.result.details
    assert orientation_entries(born_digital.columns()["quality_checks"]) == []


def test_the_gpu_engine_is_sent_the_upright_image() -> None:
    # The GPU is the one edge this machine cannot run: the stand-in builds the vLLM engine's
    # real prompt for an image model and keeps the image it would send.
    sent: list[Image.Image] = []

    def gpu_edge(engine: str, page: PageInput) -> EngineResult:
        prompt = build_prompt(get_profile("jina-ocr-v1"), page)
        sent.append(prompt["multi_modal_data"]["image"])
        return EngineResult(markdown=SENTENCE, device_seconds=0.5, device_kind="gpu")

    assessed = convert_checked("vllm", page_input(SIDEWAYS_SCAN), gpu_edge, "vllm")
    [image] = sent
    assert image.height > image.width
    out = io.BytesIO()
    image.crop((0, 0, image.width, image.height // 4)).save(out, format="PNG")
    ocr = RapidOCR(params={"Global.log_level": "error"})
    words = {word for line in ocr(out.getvalue()).txts or () for word in re.findall(r"\w+", line)}
    assert {"Docling", "bundles", "document", "conversion", "Markdown"} <= words
    assert assessed.result.details["orientation"]["rotation"] == 90
    # GPU pages are charged device seconds; detection's CPU time is not added to them.
    assert assessed.result.device_seconds == 0.5


def test_a_sideways_scan_reads_through_the_worker(
    api: httpx.Client, worker_process: subprocess.Popen[bytes], s3: ObjectStore
) -> None:
    jobs = {}
    for engine in ("auto", "textlayer"):
        with SIDEWAYS_SCAN.open("rb") as handle:
            response = api.post(
                "/v1/jobs", files={"file": (SIDEWAYS_SCAN.name, handle)}, data={"engine": engine}
            )
        assert response.status_code == 202, response.text
        jobs[engine] = response.json()["id"]

    for engine, job_id in jobs.items():
        job = wait_for_job(api, job_id)
        assert job["status"] == "succeeded", job
        [page] = job["page_details"]
        markdown = api.get(f"/v1/jobs/{job_id}/pages/1/markdown").text
        assert cer(markdown, SENTENCE) <= SENTENCE_CER_MAX, (engine, markdown)
        [entry] = orientation_entries(page["quality"]["checks"])
        assert entry["rotation"] == 90
        manifest = json.loads(s3.get_bytes(JobKeys(job_id).manifest))
        assert orientation_entries(manifest["pages"][0]["quality"]["checks"]) == [entry]
        assert page["engine"] == "rapidocr"
        keys = JobKeys(job_id)
        if engine == "textlayer":
            # Routed to the text layer, the page was stored as a PDF and not rendered. The
            # layer is empty on a scan: the worker rendered the page for the checks, so the
            # empty answer was caught and the page read by OCR instead.
            assert s3.exists(keys.page_pdf(1)) and not s3.exists(keys.page_image(1))
            assert page["quality"]["repair"] == "read by OCR instead of the text layer"
            assert page["quality"]["verdict"] == "repaired"
        else:
            # Routed to OCR: the image was stored, and no one-page PDF.
            assert s3.exists(keys.page_image(1)) and not s3.exists(keys.page_pdf(1))
            assert page["image"]["width_px"] > 0
            assert (page["quality"]["repair"], page["quality"]["verdict"]) == (None, "ok")


def test_a_sideways_scan_reads_in_pagemill_convert(tmp_path: Path) -> None:
    command = ["convert", str(SIDEWAYS_SCAN), "-o", str(tmp_path)]
    result = subprocess.run(
        [sys.executable, "-m", "cli.main", *command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = tmp_path / SIDEWAYS_SCAN.stem
    assert cer((out / "document.md").read_text(), SENTENCE) <= SENTENCE_CER_MAX
    manifest = json.loads((out / "manifest.json").read_text())
    [entry] = orientation_entries(manifest["pages"][0]["quality"]["quality_checks"])
    assert entry["rotation"] == 90
