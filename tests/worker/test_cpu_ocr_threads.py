"""The thread count of a CPU OCR call: one in a worker's pool child (a child a core),
every core in `pagemill convert`, which reads one page at a time. More threads than a
core each spin against the neighbour child, and their CPU is charged to the page."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cli import main as cli_main
from tests.support.services import ROOT

PROBE = (
    "import json\n"
    "from worker.engines.rapidocr import _ocr\n"
    "ocr = _ocr()\n"
    "models = (ocr._load_det_model(), ocr._load_rec_model())\n"
    "print(json.dumps([[m.session.session.get_session_options().intra_op_num_threads,\n"
    "                   m.session.session.get_session_options().inter_op_num_threads]\n"
    "                  for m in models]))\n"
)


def _session_threads(setting: str | None) -> list[list[int]]:
    env = {key: value for key, value in os.environ.items() if key != "PAGEMILL_CPU_OCR_THREADS"}
    if setting is not None:
        env["PAGEMILL_CPU_OCR_THREADS"] = setting
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-2000:]
    threads: list[list[int]] = json.loads(result.stdout.strip().splitlines()[-1])
    return threads


def test_a_worker_reads_a_page_on_one_thread_by_default() -> None:
    assert _session_threads(None) == [[1, 1], [1, 1]]


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores to set two threads")
def test_the_thread_count_is_a_setting() -> None:
    assert _session_threads("2") == [[2, 1], [2, 1]]


def test_the_local_command_reads_on_every_core_unless_told(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PAGEMILL_CPU_OCR_THREADS", raising=False)
    cli_main._ocr_on_every_core()
    assert os.environ["PAGEMILL_CPU_OCR_THREADS"] == str(os.cpu_count())
    monkeypatch.setenv("PAGEMILL_CPU_OCR_THREADS", "1")
    cli_main._ocr_on_every_core()
    assert os.environ["PAGEMILL_CPU_OCR_THREADS"] == "1"
