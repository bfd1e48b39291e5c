"""What a worker process loads before any task runs: a worker that only prepares and
finalizes must not carry PyMuPDF (with its layout models and onnxruntime) or the OCR
engines, which about double a process's memory; documents are opened in sandboxed
children, and pages are read only by workers that consume the `ocr` queue."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.services import ROOT

HEAVY = ("pymupdf", "pymupdf4llm", "onnxruntime", "rapidocr")


def test_the_task_modules_load_no_document_or_ocr_library() -> None:
    probe = (
        "import json, sys\n"
        "import worker.tasks, worker.celery_app\n"
        f"print(json.dumps([name for name in {HEAVY!r} if name in sys.modules]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
