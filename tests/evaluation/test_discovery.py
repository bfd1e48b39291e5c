"""Documents and their ground truth are found by name, as the README describes."""

from __future__ import annotations

import json
from pathlib import Path

from cli.evaluation.discovery import discover, invoice_record_problem

INVOICE = [{"issuer": "Acme", "invoice_number": "7", "lines": [{"name": "Widget", "qty": 1}]}]


def touch(path: Path, text: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_references_beside_the_document(tmp_path: Path) -> None:
    touch(tmp_path / "letter.pdf")
    touch(tmp_path / "letter.md")
    touch(tmp_path / "scan.png")
    touch(tmp_path / "scan.txt")
    touch(tmp_path / "scan.table.md")
    touch(tmp_path / "bill.jpg")
    touch(tmp_path / "bill.json", json.dumps(INVOICE))
    found = discover(tmp_path)
    cases = {case.name: case for case in found.cases}
    assert sorted(cases) == ["bill.jpg", "letter.pdf", "scan.png"]
    assert cases["letter.pdf"].truth.text == tmp_path / "letter.md"
    assert cases["scan.png"].truth.text == tmp_path / "scan.txt"
    assert cases["scan.png"].truth.table == tmp_path / "scan.table.md"
    assert cases["bill.jpg"].truth.invoice_fields == tmp_path / "bill.json"
    assert cases["bill.jpg"].truth.text is None
    assert {case.variant for case in found.cases} == {"original"}


def test_a_groundtruth_folder_beside_the_sources_folder(tmp_path: Path) -> None:
    touch(tmp_path / "pdf/sources/paper.pdf")
    touch(tmp_path / "pdf/groundtruth/paper.md")
    [case] = discover(tmp_path).cases
    assert case.name == "pdf/sources/paper.pdf"
    assert case.truth.text == tmp_path / "pdf/groundtruth/paper.md"


def test_documents_without_ground_truth_are_listed_as_skipped(tmp_path: Path) -> None:
    touch(tmp_path / "lonely.pdf")
    touch(tmp_path / "notes.md")  # a reference with no document
    touch(tmp_path / ".hidden/secret.pdf")
    touch(tmp_path / ".hidden/secret.md")
    found = discover(tmp_path)
    assert found.cases == []
    assert found.notes == ["lonely.pdf: skipped, no reference text, invoice fields or table"]


def test_json_that_is_not_an_invoice_record_is_ignored_with_a_reason(tmp_path: Path) -> None:
    touch(tmp_path / "paper.pdf")
    # A layout tree as another tool stores it: nested objects, not invoice fields.
    touch(tmp_path / "paper.json", json.dumps({"schema_name": "Doc", "origin": {"x": 1}}))
    touch(tmp_path / "paper.md")
    [case] = discover(tmp_path).cases
    assert case.truth.invoice_fields is None
    assert case.truth.text == tmp_path / "paper.md"
    assert "paper.json ignored: 'origin' holds an object" in discover(tmp_path).notes[0]


def test_invoice_record_shapes(tmp_path: Path) -> None:
    def problem(value: object) -> str | None:
        return invoice_record_problem(touch(tmp_path / "f.json", json.dumps(value)))

    assert problem(INVOICE) is None
    assert problem(INVOICE[0]) is None
    assert problem([]) == "a list of invoice records must hold exactly one"
    assert problem(["text"]) == "not a JSON object of invoice fields"
    assert problem({"lines": [{"nested": {"a": 1}}]}) is not None
    assert problem({"narration": ["SCONL0303", "SCONL0004"]}) is None
    assert problem({"lines": [["nested", "list"]]}) is not None
    assert invoice_record_problem(touch(tmp_path / "bad.json", "{")) is not None


def test_scanned_variants_are_known_by_their_name(tmp_path: Path) -> None:
    for name in ("bill.noise.pdf", "bill.rotate-90.pdf", "bill.final.pdf"):
        touch(tmp_path / name)
        touch(tmp_path / name.replace(".pdf", ".txt"))
    variants = {case.name: case.variant for case in discover(tmp_path).cases}
    assert variants == {
        "bill.final.pdf": "original",
        "bill.noise.pdf": "noise",
        "bill.rotate-90.pdf": "rotate-90",
    }
