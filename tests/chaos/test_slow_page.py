"""A page that outlives the task time limit: the kill counts as a failure with its
reason, the time it used is charged, a cheaper reading is tried before the page
fails, and the worker is free for the next job.

The worker runs with a 20 s hard limit and a soft limit 8 s before it. The page
is a sentence over 300,000 full-page strokes: its text layer is tiny, but layout
analysis renders it, which takes MuPDF minutes inside one C call, where the soft
limit cannot interrupt it, so the hard limit kills the pool child.
"""

from __future__ import annotations

import io
import os
import time
import zlib
from pathlib import Path
from typing import Any

import pymupdf
import pytest
from PIL import Image
from pydantic import ValidationError

from pagemill.settings import Settings
from tests.chaos.conftest import db_rows, wait_terminal
from tests.chaos.test_lost_and_killed import submit
from tests.conftest import SAMPLES
from worker.engines.base import PageFacts, PageInput
from worker.engines.router import TEXT_LAYER_ENGINE
from worker.render import pdf_page_facts
from worker.stages.budget import TIME_LIMITED, fallback_reason, shrunk_image
from worker.stages.ocr import _convert
from worker.stages.quality import convert_checked

SLOW_LIMITS = {
    "PAGEMILL_TASK_TIME_LIMIT_S": "20",
    "PAGEMILL_TASK_CLEANUP_S": "8",
    "PAGEMILL_RENDER_TIMEOUT_S": "15",
    # The page facts would send this page to plain text at once; here the budget is
    # lifted so the time limit is what stops it.
    "PAGEMILL_TEXTLAYER_MAX_CONTENT_BYTES": str(10**12),
}
SENTENCE = "A born-digital page whose drawing is far heavier than its text."
# Generous on a shared 2-core machine: the kill comes at 20 s, the retry within seconds.
JOB_BOUND_S = 150


def heavy_vector_pdf(path: Path, strokes: int = 300_000) -> Path:
    """One page: a sentence, then `strokes` full-page triangles (about 14 MB of drawing
    instructions, 40 KB compressed)."""
    document = pymupdf.open()
    page = document.new_page(width=595, height=842)
    page.insert_text((72, 72), SENTENCE, fontsize=11)
    xref = page.get_contents()[0]
    compressor = zlib.compressobj(9)
    stroke = b"0.1 w 10 10 m 585 832 l 585 10 l 10 832 l h S\n"
    parts = [compressor.compress(document.xref_stream(xref) + b"\n")]
    parts += [compressor.compress(stroke * 10_000) for _ in range(strokes // 10_000)]
    document.update_stream(xref, b"".join(parts) + compressor.flush(), compress=False)
    document.xref_set_key(xref, "Filter", "/FlateDecode")
    document.save(path)
    return path


def dense_text_pdf(path: Path, chars: int = 90_000) -> Path:
    """One page of tiny type, under the default 100,000-character budget: layout
    analysis reads it for most of a minute, mostly in Python."""
    document = pymupdf.open()
    page = document.new_page(width=595, height=842)
    writer = pymupdf.TextWriter(page.rect)
    line = "dense text for layout analysis to read word by word " * 11
    for row in range(chars // len(line) + 1):
        writer.append((2, 2 + (row % 700) * 1.2), line, fontsize=1)
    writer.write_text(page)
    writer = pymupdf.TextWriter(page.rect)
    writer.append((72, 830), SENTENCE, fontsize=1)
    writer.write_text(page)
    document.save(path, deflate=True)
    return path


def _page(job_id: str) -> dict[str, Any]:
    [row] = db_rows(
        "SELECT status::text, attempts, engine_failures, error, device_seconds, cost_usd, "
        "engine_details FROM pages WHERE job_id = %s",
        job_id,
    )
    keys = ("status", "attempts", "engine_failures", "error", "seconds", "cost", "details")
    return dict(zip(keys, row, strict=True))


def _assert_charged_for_the_kill(page: dict[str, Any]) -> None:
    # The killed attempt held the worker for the soft limit at least (12 s); it is charged
    # at the tests' 3.60 USD a device-hour, so a second costs a thousandth of a dollar.
    assert page["seconds"] is not None and page["seconds"] >= 12, page
    assert page["cost"] is not None
    assert abs(float(page["cost"]) - page["seconds"] / 1000) < 0.001, page


def _assert_worker_free(client: Any) -> None:
    follow_up = submit(client, SAMPLES / "invoice-multipage.pdf")
    assert wait_terminal(follow_up, JOB_BOUND_S) == "succeeded"


def test_time_limit_kill_is_counted_and_the_page_falls_back(
    stack_factory: Any, tmp_path: Path
) -> None:
    stack, _, _ = stack_factory(**SLOW_LIMITS)
    stack.start_api()
    worker = stack.start_worker(concurrency=1)
    with stack.client() as client:
        slow = submit(client, heavy_vector_pdf(tmp_path / "heavy.pdf"))
        assert wait_terminal(slow, JOB_BOUND_S) == "succeeded"
        page = _page(slow)
        assert page["status"] == "succeeded"
        assert page["engine_failures"] == 1 and page["attempts"] == 2, page
        assert "exceeded the 20 s time limit" in page["details"]["fallback"], page
        _assert_charged_for_the_kill(page)
        markdown = client.get(f"/v1/jobs/{slow}/pages/1/markdown")
        assert SENTENCE in markdown.text
        _assert_worker_free(client)
    assert worker.poll() is None


def test_page_over_the_time_limit_fails_with_the_reason(stack_factory: Any, tmp_path: Path) -> None:
    stack, _, _ = stack_factory(**SLOW_LIMITS, PAGEMILL_PAGE_MAX_ATTEMPTS="1")
    stack.start_api()
    worker = stack.start_worker(concurrency=1)
    with stack.client() as client:
        slow = submit(client, heavy_vector_pdf(tmp_path / "heavy.pdf"))
        assert wait_terminal(slow, JOB_BOUND_S) == "failed"
        page = _page(slow)
        assert page["status"] == "failed"
        assert page["attempts"] == 1 and page["engine_failures"] == 1, page
        assert "exceeded the 20 s time limit" in page["error"], page
        _assert_charged_for_the_kill(page)
        [(code, message)] = db_rows(
            "SELECT error_code, error_message FROM jobs WHERE id = %s", slow
        )
        assert code == "pages_failed" and "exceeded the 20 s time limit" in message
        _assert_worker_free(client)
    assert worker.poll() is None


def test_a_page_over_the_text_layer_budget_is_read_as_plain_text(tmp_path: Path) -> None:
    """Decided from the page facts before any attempt: the same page under the default
    budget (8 MiB of drawing instructions) is read as plain text at once."""
    settings = Settings()
    path = heavy_vector_pdf(tmp_path / "heavy.pdf")
    with pymupdf.open(path) as document:
        facts = pdf_page_facts(document.load_page(0), 1)
    assert facts.content_bytes is not None
    assert facts.content_bytes > settings.textlayer_max_content_bytes
    reason = fallback_reason(settings, TEXT_LAYER_ENGINE, facts, {})
    assert reason is not None and "budget for layout analysis" in reason
    page = PageInput(facts, None, 150, path.read_bytes(), reason)
    started = time.monotonic()
    assessed = convert_checked(TEXT_LAYER_ENGINE, page, _convert, "rapidocr")
    # Layout analysis of this page takes minutes; plain text about a second alone.
    assert time.monotonic() - started < 60
    assert SENTENCE in assessed.result.markdown
    assert "read as plain text" in assessed.result.details["fallback"]
    assert fallback_reason(settings, "rapidocr", facts, {}) is None


@pytest.mark.parametrize("cleanup_s", ["4", "11"])
def test_the_soft_limit_must_leave_time_to_record(cleanup_s: str) -> None:
    with pytest.raises(ValidationError, match="PAGEMILL_TASK_CLEANUP_S"):
        Settings(task_time_limit_s=20, render_timeout_s=15, task_cleanup_s=cleanup_s)


def test_the_default_cleanup_is_a_tenth_of_the_hard_limit_within_5_to_30_s() -> None:
    assert Settings(task_time_limit_s=60, render_timeout_s=45).task_soft_time_limit_s == 54
    assert Settings(task_time_limit_s=20, render_timeout_s=15).task_soft_time_limit_s == 15
    assert Settings(task_time_limit_s=600, render_timeout_s=500).task_soft_time_limit_s == 570


def test_page_stopped_at_the_soft_limit_records_it_itself(
    stack_factory: Any, tmp_path: Path
) -> None:
    """The soft limit (12 s) stops layout analysis of dense text at its next Python
    bytecode, and the task records the failure; the worker never needs to kill the child.

    The margin is 12 s, and MuPDF's text extraction of this page is one C call of about
    4 s, which no signal interrupts. In a loaded test run (another test's processes on
    both cores) that call once outlasted the margin, so the worker runs at a higher
    priority: the property under test is the soft limit's, not the machine's speed."""
    stack, _, _ = stack_factory(
        PAGEMILL_TASK_TIME_LIMIT_S="24",
        PAGEMILL_TASK_CLEANUP_S="12",
        PAGEMILL_RENDER_TIMEOUT_S="20",
    )
    stack.start_api()
    worker = stack.start_worker(concurrency=1)
    # The worker's process group: its main process and the pool child it has forked.
    os.setpriority(os.PRIO_PGRP, os.getpgid(worker.pid), -10)
    with stack.client() as client:
        dense = submit(client, dense_text_pdf(tmp_path / "dense.pdf"))
        assert wait_terminal(dense, JOB_BOUND_S) == "succeeded"
    page = _page(dense)
    assert page["engine_failures"] == 1 and page["attempts"] == 2, page
    assert "exceeded the 24 s time limit" in page["details"]["fallback"], page
    assert page["seconds"] >= 12, page
    worker_log = stack.log(f"worker{stack.workers_started}").read_text()
    assert "Soft time limit (12s) exceeded" in worker_log
    assert "Hard time limit" not in worker_log


def test_an_ocr_page_after_a_time_limit_is_read_from_a_smaller_image() -> None:
    settings = Settings()
    facts = PageFacts.image_only(1, width_pt=2384, height_pt=3370)  # A0 at 72 dpi
    reason = fallback_reason(settings, "rapidocr", facts, {TIME_LIMITED: 1})
    assert reason is not None and "time limit" in reason
    buffer = io.BytesIO()
    Image.new("L", (6600, 9350), 255).save(buffer, format="PNG")  # A0 at 200 dpi: 62 M
    png, dpi = shrunk_image(buffer.getvalue(), 200, settings.ocr_fallback_max_pixels)
    with Image.open(io.BytesIO(png)) as image:
        assert image.width * image.height <= settings.ocr_fallback_max_pixels
        assert image.width * image.height > 0.95 * settings.ocr_fallback_max_pixels
    assert 45 <= dpi <= 52
