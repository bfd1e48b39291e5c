"""The thread count of a CPU engine call (rapidocr's models, and the layout models the
text layer engine reads with): one in a worker's pool child (a child a core), every core
in `pagemill convert`, which reads one page at a time. More threads than a core each
spin against the neighbour child, and their CPU is charged to the page."""

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
# Every ONNX Runtime session pymupdf's layout models made, found among the live objects:
# pymupdf makes them as it is imported, and keeps them where no option reaches. They are
# loaded as a pool child loads its engines (worker.celery_app.load_cpu_engines).
LAYOUT_PROBE = (
    "import gc, json, sys\n"
    "import onnxruntime\n"
    "import worker.celery_app, worker.tasks\n"
    "parent_loaded = 'pymupdf' in sys.modules\n"
    "worker.celery_app.load_cpu_engines()\n"
    "sessions = [o for o in gc.get_objects() if isinstance(o, onnxruntime.InferenceSession)]\n"
    "print(json.dumps([parent_loaded, sorted({(s.get_session_options().intra_op_num_threads,\n"
    "                  s.get_session_options().inter_op_num_threads) for s in sessions}),\n"
    "                  len(sessions)]))\n"
)


def _probe(probe: str, setting: str | None) -> object:
    env = {key: value for key, value in os.environ.items() if key != "PAGEMILL_CPU_ENGINE_THREADS"}
    if setting is not None:
        env["PAGEMILL_CPU_ENGINE_THREADS"] = setting
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _session_threads(setting: str | None) -> object:
    return _probe(PROBE, setting)


def test_the_layout_models_run_on_one_thread_in_a_worker() -> None:
    # The worker's parent process must not import pymupdf: its pool children would
    # inherit sessions made before the cap.
    parent_loaded, threads, count = _probe(LAYOUT_PROBE, None)  # type: ignore[misc]
    assert parent_loaded is False
    assert count >= 2
    assert threads == [[1, 1]]


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores to set two threads")
def test_the_layout_models_follow_the_setting() -> None:
    _, threads, _ = _probe(LAYOUT_PROBE, "2")  # type: ignore[misc]
    assert threads == [[2, 1]]


def test_a_worker_reads_a_page_on_one_thread_by_default() -> None:
    assert _session_threads(None) == [[1, 1], [1, 1]]


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores to set two threads")
def test_the_thread_count_is_a_setting() -> None:
    assert _session_threads("2") == [[2, 1], [2, 1]]


def test_the_local_command_reads_on_every_core_unless_told(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PAGEMILL_CPU_ENGINE_THREADS", raising=False)
    cli_main._engines_on_every_core()
    assert os.environ["PAGEMILL_CPU_ENGINE_THREADS"] == str(os.cpu_count())
    monkeypatch.setenv("PAGEMILL_CPU_ENGINE_THREADS", "1")
    cli_main._engines_on_every_core()
    assert os.environ["PAGEMILL_CPU_ENGINE_THREADS"] == "1"
