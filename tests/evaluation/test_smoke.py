"""CI's evaluation: quality on a few corpus documents and their scans must not regress.

`pagemill eval` runs on tests/fixtures/corpus (a born-digital invoice with its invoice2data
fields and a table transcribed from the page; docling's scanned sentence, upright and
turned, with its text) plus every scanned variant of the invoice's page, and must meet
thresholds.json. The thresholds are the numbers measured on this machine's kind with some
margin; README.md ("Evaluation") states the same numbers.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from cli.evaluation.aggregate import METRICS_BY_NAME
from cli.evaluation.degrade import VARIANT_KINDS
from tests.support.services import ROOT

THRESHOLDS = Path(__file__).with_name("thresholds.json")
CORPUS = ROOT / "tests/fixtures/corpus"


def test_the_engines_meet_the_thresholds(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.main",
            "eval",
            str(CORPUS),
            "--variants",
            "--variant-pages",
            "1",
            "--thresholds",
            str(THRESHOLDS),
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
    results = json.loads(out.read_text())
    # Every variant of the one born-digital page was made and scored, with the originals.
    assert set(results["aggregates"]) == {"all", "original", *VARIANT_KINDS}
    assert results["aggregates"]["all"]["documents"] == 3 + len(VARIANT_KINDS)
    assert results["thresholds"] and all(check["passed"] for check in results["thresholds"])


def test_the_readme_states_the_thresholds_the_test_uses() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### Evaluation") :]
    stated = {
        (group, metric): float(limit)
        for group, metric, limit in re.findall(
            r"^\| `([\w-]+)` \| (\w+) \| [<>]= ([\d.]+) \|", section, re.MULTILINE
        )
    }
    thresholds = json.loads(THRESHOLDS.read_text())
    assert stated == {
        (group, metric): limit
        for group, limits in thresholds.items()
        for metric, limit in limits.items()
    }
    assert all(metric in METRICS_BY_NAME for _, metric in stated)
