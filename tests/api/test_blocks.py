"""GET /v1/jobs/{id}/pages/{n}/blocks through the real API, worker, Postgres and S3.

The boxes are checked against where PyMuPDF says the words are on the page: for a
born-digital page, from its text layer; for a scanned page, on the PDF it was rendered from.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pymupdf
import pytest

from pagemill.documents.blocks import BlockKind, Box, PageBlocks
from tests.conftest import FIXTURES, make_client_key, wait_for_job
from tests.support.factories import add_job

INVOICE = FIXTURES / "corpus" / "AzureInterior.pdf"
SCAN_DPI = 150
# Words the recogniser reads whole on the rendered invoice, far apart on the page.
SCANNED_WORDS = ("Fremont", "Scranton", "Beeswax", "Incoterm:", "US1234567890", "Truffles")


def text_layer_words(path: Path) -> tuple[list[tuple[str, Box]], tuple[float, float]]:
    with pymupdf.open(path) as document:
        page = document[0]
        words = [(str(w[4]), (w[0], w[1], w[2], w[3])) for w in page.get_text("words")]
        return words, (page.rect.width, page.rect.height)


def submit(api: httpx.Client, name: str, body: bytes) -> str:
    response = api.post("/v1/jobs", files={"file": (name, body)})
    assert response.status_code == 202, response.text
    job = wait_for_job(api, response.json()["id"])
    assert job["status"] == "succeeded", job
    return str(job["id"])


def page_blocks(api: httpx.Client, job_id: str, number: int = 1) -> PageBlocks:
    response = api.get(f"/v1/jobs/{job_id}/pages/{number}/blocks")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    return PageBlocks.model_validate_json(response.content)


def words_outside_cells(page: PageBlocks) -> list[tuple[str, Box]]:
    # A table's words are given twice: in the table's lines and in their cells.
    return [
        (word.text, word.box)
        for block in page.blocks
        if block.kind is not BlockKind.TABLE_CELL
        for line in block.lines
        for word in line.words
    ]


def test_a_born_digital_page_has_its_words_where_its_text_layer_puts_them(
    api: httpx.Client, api_url: str, worker_process: subprocess.Popen[bytes]
) -> None:
    job_id = submit(api, INVOICE.name, INVOICE.read_bytes())
    page = page_blocks(api, job_id)
    expected, (width, height) = text_layer_words(INVOICE)
    assert (page.page, page.engine, page.rotation) == (1, "textlayer", 0)
    assert (page.width_pt, page.height_pt) == pytest.approx((width, height), abs=0.01)
    found = words_outside_cells(page)
    assert sorted(text for text, _ in found) == sorted(text for text, _ in expected)
    for text, box in expected:
        assert any(t == text and b == pytest.approx(box, abs=0.05) for t, b in found), text

    kinds = {block.kind for block in page.blocks}
    assert {BlockKind.TEXT, BlockKind.HEADING, BlockKind.TABLE, BlockKind.TABLE_CELL} <= kinds
    total = next(box for text, box in expected if text == "279.84")
    [cell] = [b for b in page.blocks if b.kind is BlockKind.TABLE_CELL and "279.84" in b.text]
    assert cell.row is not None and cell.column is not None
    [word] = [w for line in cell.lines for w in line.words if w.text == "279.84"]
    assert word.box == pytest.approx(total, abs=0.01)
    heading = next(b for b in page.blocks if b.kind is BlockKind.HEADING and "INV/" in b.text)
    assert heading.text == "Invoice INV/2023/03/0008"

    # The errors the page's Markdown gives, for the same reasons.
    missing = api.get(f"/v1/jobs/{job_id}/pages/2/blocks")
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "page_not_found")
    with httpx.Client(
        base_url=api_url, headers={"Authorization": f"Bearer {make_client_key()}"}
    ) as other:
        theirs = other.get(f"/v1/jobs/{job_id}/pages/1/blocks")
    assert (theirs.status_code, theirs.json()["error"]["code"]) == (404, "job_not_found")
    assert api.get(f"/v1/jobs/{job_id}/pages/0/blocks").status_code == 422


def test_a_scanned_page_has_its_words_where_the_printed_page_has_them(
    api: httpx.Client, worker_process: subprocess.Popen[bytes]
) -> None:
    with pymupdf.open(INVOICE) as document:
        png = document[0].get_pixmap(dpi=SCAN_DPI).tobytes("png")
    page = page_blocks(api, submit(api, "scan.png", png))
    expected, (width, height) = text_layer_words(INVOICE)
    assert (page.engine, page.rotation) == ("rapidocr", 0)
    # The image is whole pixels: its size in points is the page's within a pixel.
    assert (page.width_pt, page.height_pt) == pytest.approx((width, height), abs=72 / SCAN_DPI)
    found = words_outside_cells(page)
    for text in SCANNED_WORDS:
        printed = next(box for t, box in expected if t == text)
        read = [box for t, box in found if t == text]
        assert len(read) == 1, (text, read)
        # The recogniser's boxes are padded and cut from its character positions: their
        # middles fall within a few points of the printed word's.
        assert centre(read[0]) == pytest.approx(centre(printed), abs=4), text
    assert {BlockKind.TEXT, BlockKind.TABLE, BlockKind.TABLE_CELL} <= {b.kind for b in page.blocks}
    confidences = [w.confidence for b in page.blocks for ln in b.lines for w in ln.words]
    assert all(c is not None and 0 < c <= 1 for c in confidences)


def centre(box: Box) -> tuple[float, float]:
    return ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)


def test_pages_not_read_or_read_without_boxes_say_so(api: httpx.Client) -> None:
    from pagemill.db.models import Client
    from pagemill.db.session import session_scope
    from pagemill.domain import JobStatus, PageStatus

    with session_scope() as session:
        [client] = session.query(Client).all()
        running = add_job(
            session, client.id, [{"status": PageStatus.queued}], status=JobStatus.running
        ).id
        by_vlm = add_job(session, client.id, [{"engine": "vllm"}]).id
    waiting = api.get(f"/v1/jobs/{running}/pages/1/blocks")
    assert (waiting.status_code, waiting.json()["error"]["code"]) == (409, "page_not_ready")
    assert "queued" in waiting.json()["error"]["message"]
    ungrounded = api.get(f"/v1/jobs/{by_vlm}/pages/1/blocks")
    assert ungrounded.status_code == 404
    assert ungrounded.json()["error"]["code"] == "blocks_not_available"
    assert "gives no boxes" in ungrounded.json()["error"]["message"]
