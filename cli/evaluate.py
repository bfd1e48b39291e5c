"""`pagemill eval` and `pagemill eval-variants`: output quality against ground truth.

Documents go through `pagemill convert`'s in-process pipeline, so no server is needed.
The folder layout is described in `cli/evaluation/discovery.py` and the README.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console, RenderableType
from rich.measure import Measurement

from cli.evaluation.degrade import VARIANT_KINDS
from cli.evaluation.evaluate import (
    Evaluation,
    VariantOptions,
    plan_evaluation,
    run_evaluation,
)
from cli.evaluation.invoices import invoice_scores_by_group, rates_table
from cli.evaluation.report import aggregates_table, documents_table, results_json
from cli.evaluation.runner import DocumentRun
from cli.evaluation.thresholds import (
    ThresholdsInvalid,
    check_thresholds,
    load_thresholds,
)
from cli.evaluation.variants import make_variants
from cli.progress import progress_bar
from pagemill.engines.catalog import LOCAL_ENGINE_CHOICES

ENGINES = LOCAL_ENGINE_CHOICES
# Exit statuses: 1 is a result that falls short (a document failed, a threshold was
# missed); 2 is an evaluation that could not be run as asked.
EXIT_SHORT = 1
EXIT_USAGE = 2

console = Console()


def evaluate_command(
    folder: Path,
    out: Path,
    engine: str,
    variants: bool,
    variant_pages: int,
    variant_kinds: str | None,
    seed: int,
    thresholds_path: Path | None,
    work_dir: Path | None,
) -> None:
    if engine not in ENGINES:
        raise typer.BadParameter(
            f"engine must be one of {', '.join(ENGINES)}", param_hint="--engine"
        )
    thresholds = _thresholds(thresholds_path)
    kinds = _kinds(variant_kinds, "--variant-kinds")
    options = VariantOptions(kinds=kinds, max_pages=variant_pages, seed=seed) if variants else None
    with _work_dir(work_dir) as work:
        evaluation = plan_evaluation(folder, work, engine, options)
        for note in evaluation.notes:
            console.print(f"[dim]{note}[/dim]", soft_wrap=True)
        if not evaluation.cases:
            _fail(_nothing_to_evaluate(folder, variants), EXIT_USAGE)
        _run_with_progress(evaluation, work)
    groups = evaluation.groups()
    checks = check_thresholds(thresholds, groups)
    _print_wide(documents_table(evaluation.runs))
    _print_wide(aggregates_table(groups))
    invoice_groups = invoice_scores_by_group(evaluation.runs)
    if invoice_groups:
        _print_wide(rates_table(invoice_groups))
    discarded = None if work_dir is not None else work
    results = results_json(evaluation, checks, discarded=discarded)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    console.print(f"results written to {out}")
    shortfalls = [
        f"{run.case.name} could not be converted: {run.error}"
        for run in evaluation.runs
        if run.error
    ]
    for check in checks:
        if check.passed:
            console.print(f"[green]met[/green] {check.describe()}")
        else:
            shortfalls.append(f"threshold missed: {check.describe()}")
    for shortfall in shortfalls:
        console.print(f"[red]{shortfall}[/red]", soft_wrap=True)
    if shortfalls:
        raise typer.Exit(EXIT_SHORT)


def _thresholds(path: Path | None) -> dict[str, dict[str, float]]:
    # Read before any document runs: a typo in the file should not cost a whole run.
    if path is None:
        return {}
    try:
        return load_thresholds(path)
    except ThresholdsInvalid as error:
        _fail(str(error), EXIT_USAGE)


def variants_command(source: Path, out: Path, pages: int, seed: int, kinds: str | None) -> None:
    made = make_variants(source, out, _kinds(kinds, "--kinds"), max_pages=pages, seed=seed)
    for note in made.notes:
        console.print(f"[dim]{note}[/dim]", soft_wrap=True)
    if not made.created:
        _fail(f"No born-digital PDF under {source}: nothing to make variants of.", EXIT_USAGE)
    console.print(f"{len(made.created)} variants written under {out}")


def _kinds(listed: str | None, option: str) -> tuple[str, ...]:
    if listed is None:
        return VARIANT_KINDS
    kinds = tuple(kind.strip() for kind in listed.split(",") if kind.strip())
    unknown = [kind for kind in kinds if kind not in VARIANT_KINDS]
    if unknown or not kinds:
        raise typer.BadParameter(
            f"choose from {', '.join(VARIANT_KINDS)} (got {listed!r})", param_hint=option
        )
    return kinds


def _nothing_to_evaluate(folder: Path, variants: bool) -> str:
    made = " and no born-digital PDF to make scanned variants of" if variants else ""
    return (
        f"No document with ground truth under {folder}{made}. Put the reference beside each "
        "document: name.md or name.txt (text), name.json (invoice fields), name.table.md "
        "(a Markdown table); or pass --variants to score scans made from born-digital PDFs."
    )


@contextmanager
def _work_dir(kept: Path | None) -> Iterator[Path]:
    if kept is not None:
        kept.mkdir(parents=True, exist_ok=True)
        yield kept
        return
    with tempfile.TemporaryDirectory(prefix="pagemill-eval-") as temporary:
        yield Path(temporary)


def _run_with_progress(evaluation: Evaluation, work: Path) -> None:
    with progress_bar(console) as progress:
        task = progress.add_task("documents", total=len(evaluation.cases))

        def finished(run: DocumentRun) -> None:
            progress.advance(task)
            progress.update(task, description=run.case.name)

        run_evaluation(evaluation, work, on_document=finished)


def _print_wide(renderable: RenderableType) -> None:
    # Piped or captured output (CI logs) is not cut to a terminal's width.
    out = console
    if not console.is_terminal:
        unbounded = Measurement.get(console, console.options.update_width(100_000), renderable)
        out = Console(width=max(console.width, unbounded.maximum))
    out.print(renderable)


def _fail(message: str, status: int) -> NoReturn:
    console.print(f"[red]{message}[/red]", soft_wrap=True)
    raise typer.Exit(status)
