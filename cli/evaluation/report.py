"""An evaluation as JSON (for machines and CI) and as tables (for people)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.table import Table

from cli.evaluation.aggregate import METRICS, Aggregate
from cli.evaluation.evaluate import Evaluation
from cli.evaluation.invoices import invoice_scores_by_group, summary_json
from cli.evaluation.runner import DocumentRun
from cli.evaluation.thresholds import ThresholdCheck
from pagemill.quality.score import Verdict, job_verdict


def results_json(
    evaluation: Evaluation, checks: list[ThresholdCheck], discarded: Path | None = None
) -> dict[str, Any]:
    """The run as JSON; paths under `discarded` (a temporary work folder) are left out."""

    def path(value: Path | None) -> str | None:
        if value is None or (discarded is not None and value.is_relative_to(discarded)):
            return None
        return str(value)

    return {
        "root": str(evaluation.root),
        "engine": evaluation.engine,
        "variants": (
            None if evaluation.variants is None else dataclasses.asdict(evaluation.variants)
        ),
        "documents": [_document_json(run, path) for run in evaluation.runs],
        "aggregates": {group: found.as_json() for group, found in evaluation.groups().items()},
        "thresholds": [check.as_json() for check in checks],
        "invoice_extraction": summary_json(invoice_scores_by_group(evaluation.runs)),
        "notes": evaluation.notes,
    }


def _document_json(run: DocumentRun, path: Callable[[Path | None], str | None]) -> dict[str, Any]:
    truth = run.case.truth
    scores = run.scores
    return {
        "name": run.case.name,
        "variant": run.case.variant,
        "document": path(run.case.document),
        "ground_truth": {
            "text": path(truth.text),
            "invoice_fields": path(truth.invoice_fields),
            "table": path(truth.table),
        },
        "markdown": path(run.markdown_path),
        "error": run.error,
        "seconds": round(run.seconds, 3),
        "pages": [dataclasses.asdict(page) for page in run.pages],
        "invoice": None if run.invoice is None else run.invoice.as_json(),
        "scores": None
        if scores is None
        else {
            "character_error_rate": scores.character_error_rate,
            "bag_of_words_error_rate": scores.bag_of_words_error_rate,
            "invoice_fields": None
            if scores.fields is None
            else {
                "recall": scores.fields.recall,
                "found": list(scores.fields.found),
                "missing": list(scores.fields.missing),
            },
            "table": None if scores.table is None else dataclasses.asdict(scores.table),
        },
    }


def documents_table(runs: list[DocumentRun]) -> Table:
    table = Table(title="Documents")
    table.add_column("document")
    table.add_column("variant")
    for column in ("pages", "engines", "verdict", "CER", "bWER", "fields", "table r/c/cells", "s"):
        table.add_column(column, justify="left" if column in ("engines", "verdict") else "right")
    for run in runs:
        table.add_row(run.case.name, run.case.variant, *_document_cells(run))
    return table


def _document_cells(run: DocumentRun) -> list[str]:
    if run.scores is None:
        return ["", "", f"[red]failed: {run.error}[/red]", "", "", "", "", f"{run.seconds:.1f}"]
    engines = sorted({page.engine for page in run.pages})
    worst = job_verdict(Verdict(page.verdict) for page in run.pages).value if run.pages else ""
    scores = run.scores
    fields = scores.fields
    table = scores.table
    return [
        str(len(run.pages)),
        ",".join(engines),
        worst,
        _number(scores.character_error_rate),
        _number(scores.bag_of_words_error_rate),
        "" if fields is None else f"{len(fields.found)}/{len(fields.found) + len(fields.missing)}",
        "" if table is None else f"{table.rows:.2f}/{table.columns:.2f}/{table.cells:.2f}",
        f"{run.seconds:.1f}",
    ]


def aggregates_table(groups: dict[str, Aggregate]) -> Table:
    table = Table(title="Aggregates (mean over documents; n documents in brackets)")
    table.add_column("group")
    for column in ("documents", "failed", "pages", "s"):
        table.add_column(column, justify="right")
    for metric in METRICS:
        table.add_column(metric.name.replace("_", " "), justify="right")
    for group, found in groups.items():
        table.add_row(
            group,
            str(found.documents),
            str(found.failed),
            str(found.pages),
            f"{found.seconds:.1f}",
            *(
                ""
                if found.means[m.name] is None
                else f"{found.means[m.name]:.4f} ({found.counts[m.name]})"
                for m in METRICS
            ),
        )
    return table


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"
