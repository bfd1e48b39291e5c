"""`pagemill convert --furniture`: the same furniture handling as the workers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.running_headers import (
    INVOICE_NUMBER,
    RUNNING_HEADER,
    invoice_with_running_header,
)
from tests.support.services import ROOT


def convert(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", "convert", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize(
    ("mode", "headers_in_document", "page_numbers_in_document"),
    [("separate", 1, False), ("inline", 3, True), ("drop", 1, False)],
)
def test_convert_furniture_modes(
    tmp_path: Path, mode: str, headers_in_document: int, page_numbers_in_document: bool
) -> None:
    source = invoice_with_running_header(tmp_path / "running.pdf", pages=3)
    result = convert("--furniture", mode, "-o", str(tmp_path / "out"), str(source))
    assert result.returncode == 0, result.stdout + result.stderr

    target = tmp_path / "out" / "running"
    document = (target / "document.md").read_text()
    assert INVOICE_NUMBER in document
    assert document.count(RUNNING_HEADER) == headers_in_document
    assert ("Page 2 of 3" in document) is page_numbers_in_document
    manifest = json.loads((target / "manifest.json").read_text())
    assert manifest["furniture"] == mode
    page_two = manifest["pages"][1]["furniture"]
    assert [(item["text"], item["kind"]) for item in page_two] == [
        (RUNNING_HEADER, "running"),
        ("Page 2 of 3", "page_number"),
    ]
    assert all(item["in_document"] is page_numbers_in_document for item in page_two)
    # The page files keep what the engine wrote.
    assert RUNNING_HEADER in (target / "pages" / "2.md").read_text()


def test_convert_refuses_an_unknown_furniture_mode(tmp_path: Path) -> None:
    source = invoice_with_running_header(tmp_path / "running.pdf", pages=2)
    result = convert("--furniture", "hide", "-o", str(tmp_path / "out"), str(source))
    assert result.returncode == 2
    assert "furniture must be separate, inline or drop" in result.stdout + result.stderr
    assert not (tmp_path / "out").exists()
