"""`pagemill eval` on handcrafted documents reproduces numbers worked out by hand.

The documents' text layers are written here, so the pipeline's output is known: the
text layer engine returns it exactly. The references differ from it by a known amount.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pymupdf
import pytest

from tests.support.services import ROOT

TABLE = [["Item", "Qty", "Price"], ["Apple", "3", "1.50"], ["Pear", "2", "2.00"]]


def write_handcrafted(folder: Path) -> None:
    document = pymupdf.open()
    page = document.new_page(width=595, height=842)
    page.insert_text((72, 100), "The quick brown fox jumps over the lazy dog.", fontsize=12)
    page.insert_text((72, 130), "Invoice INV-42 dated 31/01/2024, total 12.50 EUR.", fontsize=12)
    for r, row in enumerate(TABLE):  # a ruled table, as the layout pass recognises
        for c, cell in enumerate(row):
            box = pymupdf.Rect(72 + c * 120, 200 + r * 24, 192 + c * 120, 224 + r * 24)
            page.draw_rect(box, color=(0, 0, 0), width=0.8)
            page.insert_text((box.x0 + 4, box.y1 - 7), cell, fontsize=11)
    document.save(folder / "hand.pdf")
    # "jumped" for "jumps": 2 edits (s -> e, + d).
    (folder / "hand.txt").write_text(
        "The quick brown fox jumped over the lazy dog.\n"
        "Invoice INV-42 dated 31/01/2024, total 12.50 EUR.\n"
        "Item Qty Price\nApple 3 1.50\nPear 2 2.00\n"
    )
    record = {
        "issuer": "Hand Made Ltd",  # names the template: not a field to find
        "invoice_number": "INV-42",
        "date": "2024-01-31",
        "amount": 12.5,
        "partner_name": "Acme Ltd",  # not on the page
    }
    (folder / "hand.json").write_text(json.dumps([record]))
    # One cell misread in the reference: "2.50" for "2.00".
    (folder / "hand.table.md").write_text(
        "| Item | Qty | Price |\n|---|---|---|\n| Apple | 3 | 1.50 |\n| Pear | 2 | 2.50 |\n"
    )
    short = pymupdf.open()
    short.new_page().insert_text((72, 100), "Invoice INV-43 for spare parts, total 7.00 EUR.")
    short.save(folder / "short.pdf")
    (folder / "short.json").write_text(json.dumps({"invoice_number": "INV-43", "amount": 8.0}))


def run_eval(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", "eval", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def handcrafted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("handcrafted")
    write_handcrafted(folder)
    return folder


def test_the_numbers_worked_out_by_hand(handcrafted: Path, tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    thresholds = tmp_path / "thresholds.json"
    thresholds.write_text(
        json.dumps(
            {
                "all": {"character_error_rate": 0.02, "invoice_field_recall": 0.7},
                "rotate-90": {"character_error_rate": 0.5},
            }
        )
    )
    result = run_eval(handcrafted, "--out", out, "--thresholds", thresholds)
    results: dict[str, Any] = json.loads(out.read_text())
    documents = {document["name"]: document for document in results["documents"]}
    hand = documents["hand.pdf"]
    assert [page["engine"] for page in hand["pages"]] == ["textlayer"]
    scores = hand["scores"]
    # The reference reads "The quick brown fox jumped over the lazy dog. Invoice INV-42
    # dated 31/01/2024, total 12.50 EUR. Item Qty Price Apple 3 1.50 Pear 2 2.00":
    # 45 + 1 + 49 + 1 + 14 + 1 + 12 + 1 + 11 = 135 characters, 2 of them wrong.
    assert scores["character_error_rate"] == pytest.approx(2 / 135)
    # 9 + 7 + 9 = 25 reference words; "jumped" missing and "jumps" extra: 2 / (2 x 25).
    assert scores["bag_of_words_error_rate"] == pytest.approx(0.04)
    # Number, date (31/01/2024) and amount (12.50) are on the page, the partner is not.
    assert scores["invoice_fields"] == {
        "recall": 0.75,
        "found": ["invoice_number", "date", "amount"],
        "missing": ["partner_name"],
    }
    # 3 x 3 cells; "2.00" against "2.50" is 1 - 2/8 similar (Indel): (8 + 0.75) / 9.
    table = scores["table"]
    assert (table["rows"], table["columns"]) == (1.0, 1.0)
    assert table["cells"] == pytest.approx(8.75 / 9)
    # short.pdf: the number is there, 7.00 is not the expected 8.0.
    assert documents["short.pdf"]["scores"]["invoice_fields"]["recall"] == 0.5
    assert documents["short.pdf"]["scores"]["character_error_rate"] is None

    metrics = results["aggregates"]["all"]["metrics"]
    assert metrics["character_error_rate"] == {"mean": pytest.approx(2 / 135), "documents": 1}
    assert metrics["invoice_field_recall"] == {"mean": 0.625, "documents": 2}
    assert results["aggregates"]["all"]["documents"] == 2
    assert set(results["aggregates"]) == {"all", "original"}

    # The recall threshold and the one on a group with no documents are missed.
    assert result.returncode == 1, result.stdout + result.stderr
    assert [(c["metric"], c["passed"]) for c in results["thresholds"]] == [
        ("character_error_rate", True),
        ("invoice_field_recall", False),
        ("character_error_rate", False),
    ]
    output = " ".join(result.stdout.split())
    assert "threshold missed: all invoice_field_recall: 0.6250 (must be at least 0.7)" in output
    assert "threshold missed: rotate-90 character_error_rate: no documents" in output
    assert "hand.pdf" in output and "0.0148" in output  # the per-document table


def test_thresholds_that_are_met_exit_zero(handcrafted: Path, tmp_path: Path) -> None:
    thresholds = tmp_path / "thresholds.json"
    thresholds.write_text(json.dumps({"all": {"invoice_field_recall": 0.6, "table_cells": 0.9}}))
    result = run_eval(handcrafted, "--out", tmp_path / "r.json", "--thresholds", thresholds)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "met all table_cells: 0.9722 (must be at least 0.9)" in " ".join(result.stdout.split())


def test_a_folder_without_ground_truth_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_eval(empty, "--out", tmp_path / "r.json")
    assert result.returncode == 2
    assert "No document with ground truth under" in " ".join(result.stdout.split())
    assert not (tmp_path / "r.json").exists()

    write_handcrafted(empty)
    for reference in ("hand.txt", "hand.json", "hand.table.md", "short.json"):
        (empty / reference).unlink()
    result = run_eval(empty, "--out", tmp_path / "r.json")
    assert result.returncode == 2
    output = " ".join(result.stdout.split())
    assert "hand.pdf: skipped, no reference text, invoice fields or table" in output


def test_bad_thresholds_and_broken_documents(handcrafted: Path, tmp_path: Path) -> None:
    thresholds = tmp_path / "thresholds.json"
    thresholds.write_text(json.dumps({"all": {"accuracy": 0.9}}))
    result = run_eval(handcrafted, "--out", tmp_path / "r.json", "--thresholds", thresholds)
    assert result.returncode == 2
    assert "unknown metric 'accuracy'" in " ".join(result.stdout.split())

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "notes.pdf").write_text("plain text, not a PDF")
    (broken / "notes.md").write_text("plain text")
    out = tmp_path / "broken.json"
    result = run_eval(broken, "--out", out)
    assert result.returncode == 1
    [document] = json.loads(out.read_text())["documents"]
    assert document["scores"] is None and "not a PDF" in document["error"]
    assert "notes.pdf could not be converted" in " ".join(result.stdout.split())
