"""An evaluation run: find the cases, optionally add scanned variants, convert, score."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cli.evaluation.aggregate import Aggregate, aggregates_by_group
from cli.evaluation.degrade import VARIANT_KINDS
from cli.evaluation.discovery import EvalCase, discover
from cli.evaluation.runner import DocumentRun, run_case
from cli.evaluation.variants import make_variants

VARIANTS_FOLDER = "variants"
OUTPUTS_FOLDER = "outputs"


@dataclass(frozen=True)
class VariantOptions:
    kinds: tuple[str, ...] = VARIANT_KINDS
    max_pages: int = 2
    seed: int = 0


@dataclass
class Evaluation:
    root: Path
    engine: str
    variants: VariantOptions | None
    cases: list[EvalCase]
    notes: list[str]
    runs: list[DocumentRun] = field(default_factory=list)

    def groups(self) -> dict[str, Aggregate]:
        return aggregates_by_group(self.runs)


def plan_evaluation(
    root: Path, work_dir: Path, engine: str, variants: VariantOptions | None
) -> Evaluation:
    """The cases under `root`, and with `variants` those made from its born-digital PDFs.

    Variant cases are named `variants/<path of the source>.KIND.pdf`, so they can never
    be confused with documents of the folder itself.
    """
    found = discover(root)
    cases, notes = list(found.cases), list(found.notes)
    if variants is not None:
        variants_root = work_dir / VARIANTS_FOLDER
        made = make_variants(
            root, variants_root, variants.kinds, max_pages=variants.max_pages, seed=variants.seed
        )
        notes.extend(made.notes)
        generated = discover(variants_root)
        cases.extend(
            EvalCase(f"{VARIANTS_FOLDER}/{case.name}", case.document, case.variant, case.truth)
            for case in generated.cases
        )
    return Evaluation(root, engine, variants, cases, notes)


def run_evaluation(
    evaluation: Evaluation,
    work_dir: Path,
    on_document: Callable[[DocumentRun], None] | None = None,
) -> Evaluation:
    outputs = work_dir / OUTPUTS_FOLDER
    for index, case in enumerate(evaluation.cases, start=1):
        run = run_case(case, index, outputs, evaluation.engine)
        evaluation.runs.append(run)
        if on_document is not None:
            on_document(run)
    return evaluation
