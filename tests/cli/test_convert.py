"""`pagemill convert` needs no servers: run it with every service address dead."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pagemill.documents.blocks import PageBlocks
from tests.conftest import SAMPLES
from tests.support.services import ROOT, free_port

DEAD = f"127.0.0.1:{free_port()}"  # nothing listens here


def test_convert_works_with_every_service_unreachable(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PAGEMILL_DATABASE_URL": f"postgresql+psycopg://postgres@{DEAD}/nowhere",
        "PAGEMILL_BROKER_URL": f"redis://{DEAD}/0",
        "PAGEMILL_S3_ENDPOINT": DEAD,
    }
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.main",
            "convert",
            *sorted(SAMPLES.iterdir()),
            "-o",
            str(tmp_path),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    invoice = tmp_path / "invoice-multipage"
    document = (invoice / "document.md").read_text()
    assert "INV/2023/03/0008" in document and "279.84" in document
    assert sorted(p.name for p in (invoice / "pages").iterdir()) == [
        "1.json",
        "1.md",
        "1.png",
        "2.json",
        "2.md",
        "2.png",
        "3.json",
        "3.md",
        "3.png",
    ]
    # Each page's blocks beside its Markdown, as the workers store them.
    blocks = PageBlocks.model_validate_json((invoice / "pages" / "2.json").read_text())
    assert (blocks.page, blocks.engine) == (2, "textlayer")
    words = [w.text for b in blocks.blocks for line in b.lines for w in line.words]
    assert "INV/2023/03/0008" in words
    manifest = json.loads((invoice / "manifest.json").read_text())
    assert [page["engine"] for page in manifest["pages"]] == ["textlayer"] * 3
    scanned = json.loads((tmp_path / "scanned-sentence" / "manifest.json").read_text())
    assert scanned["pages"][0]["engine"] == "rapidocr"
    for page in manifest["pages"] + scanned["pages"]:
        assert page["device_seconds"] > 0
        assert page["compute_seconds"] == page["device_seconds"]  # the old name, one release
    assert "self contained package" in (tmp_path / "scanned-sentence" / "document.md").read_text()
    assert "textlayer" in result.stdout and "rapidocr" in result.stdout  # the per-page table


def test_convert_pages_and_bad_input(tmp_path: Path) -> None:
    run = [sys.executable, "-m", "cli.main", "convert", "-o", str(tmp_path)]
    result = subprocess.run(
        [*run, "--pages", "2", str(SAMPLES / "invoice-multipage.pdf")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    pages = sorted(p.name for p in (tmp_path / "invoice-multipage" / "pages").iterdir())
    assert pages == ["2.json", "2.md", "2.png"]
    bogus = tmp_path / "notes.pdf"
    bogus.write_text("plain text, not a PDF")
    result = subprocess.run(
        [*run, str(bogus)], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 1
    assert "not a PDF" in result.stdout
