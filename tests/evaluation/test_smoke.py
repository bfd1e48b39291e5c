"""CI's evaluation: quality on a few corpus documents and their scans must not regress.

`pagemill eval` runs on tests/fixtures/corpus (a born-digital invoice with its invoice2data
fields and a table transcribed from the page; docling's scanned sentence, upright and
turned, with its text) plus every scanned variant of the invoice's page, and must meet
thresholds.json. The thresholds are the numbers measured on this machine's kind with some
margin; README.md ("Evaluation") states the same numbers.

A second run scores scanned invoice line items: tests/fixtures/invoice-tables holds four
born-digital invoices whose line items were once lost on their scans (Flipkart's wrapped
across lines, OYO's rows spaced apart, Saeco's under a table of header fields, AWS's
charges a two-column list of labels and amounts), each
with its line-item table transcribed from the page; their `skew` scans must meet
invoice_tables_thresholds.json.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from cli.evaluation.aggregate import METRICS_BY_NAME
from cli.evaluation.degrade import VARIANT_KINDS
from tests.support.services import ROOT

THRESHOLDS = Path(__file__).with_name("thresholds.json")
CORPUS = ROOT / "tests/fixtures/corpus"
INVOICE_TABLES_THRESHOLDS = Path(__file__).with_name("invoice_tables_thresholds.json")
INVOICE_TABLES = ROOT / "tests/fixtures/invoice-tables"


def run_eval(folder: Path, thresholds: Path, tmp_path: Path, *options: str) -> dict[str, Any]:
    out = tmp_path / "results.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.main",
            "eval",
            str(folder),
            "--variants",
            "--variant-pages",
            "1",
            *options,
            "--thresholds",
            str(thresholds),
            "--out",
            str(out),
            "--work-dir",
            str(tmp_path / "work"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    print(result.stdout)  # the tables, for the CI log
    assert result.returncode == 0, result.stdout + result.stderr
    results: dict[str, Any] = json.loads(out.read_text())
    return results


def test_the_engines_meet_the_thresholds(tmp_path: Path) -> None:
    results = run_eval(CORPUS, THRESHOLDS, tmp_path)
    # Every variant of the one born-digital page was made and scored, with the originals.
    assert set(results["aggregates"]) == {"all", "original", *VARIANT_KINDS}
    assert results["aggregates"]["all"]["documents"] == 3 + len(VARIANT_KINDS)
    assert results["thresholds"] and all(check["passed"] for check in results["thresholds"])


def test_scanned_invoice_line_items_meet_the_table_thresholds(tmp_path: Path) -> None:
    results = run_eval(
        INVOICE_TABLES, INVOICE_TABLES_THRESHOLDS, tmp_path, "--variant-kinds", "skew"
    )
    skew = results["aggregates"]["skew"]
    # Each invoice's scan was made and compared with its line-item table.
    assert skew["documents"] == 4
    assert skew["metrics"]["table_cells"]["documents"] == 4
    assert results["thresholds"] and all(check["passed"] for check in results["thresholds"])


def test_the_readme_states_the_thresholds_the_test_uses() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### Evaluation") :]
    invoice_tables = section.index("Scanned invoice line items in CI")
    for text, path in (
        (section[:invoice_tables], THRESHOLDS),
        (section[invoice_tables:], INVOICE_TABLES_THRESHOLDS),
    ):
        stated = {
            (group, metric): float(limit)
            for group, metric, limit in re.findall(
                r"^\| `([\w-]+)` \| (\w+) \| [<>]= ([\d.]+) \|", text, re.MULTILINE
            )
        }
        thresholds = json.loads(path.read_text())
        assert stated == {
            (group, metric): limit
            for group, limits in thresholds.items()
            for metric, limit in limits.items()
        }
        assert all(metric in METRICS_BY_NAME for _, metric in stated)
