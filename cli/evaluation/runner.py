"""Run each evaluation case through `pagemill convert`'s in-process pipeline.

That is the workers' own prepare, routing, engines, quality checks with their repair,
and assembly, so what is measured here is what the service returns.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from cli.convert import convert_file
from cli.evaluation.discovery import EvalCase
from cli.evaluation.invoices import InvoiceScore, score_invoice_file
from cli.evaluation.scoring import DocumentScores, score_document


@dataclass(frozen=True)
class PageRun:
    number: int
    engine: str
    verdict: str
    quality_score: float
    repair: str | None
    seconds: float


@dataclass(frozen=True)
class DocumentRun:
    case: EvalCase
    pages: list[PageRun]
    seconds: float
    markdown_path: Path | None
    scores: DocumentScores | None  # None when the document could not be converted
    error: str | None = None
    invoice: InvoiceScore | None = None  # where the reference holds invoice fields


def run_case(case: EvalCase, index: int, work_dir: Path, engine: str) -> DocumentRun:
    # Documents may share a file name (a PDF and its PNG render, or one per folder):
    # each gets its own output folder, numbered in run order.
    out_dir = work_dir / f"{index:03d}-{_slug(case.name)}"
    started = time.perf_counter()
    try:
        extract = "invoice" if case.truth.invoice_fields is not None else None
        converted = convert_file(case.document, out_dir, engine=engine, extract=extract)
    # A document that breaks the pipeline is a finding to report with the others, not a
    # reason to lose the rest of the run.
    except Exception as error:
        return DocumentRun(
            case=case,
            pages=[],
            seconds=time.perf_counter() - started,
            markdown_path=None,
            scores=None,
            error=f"{type(error).__name__}: {error}",
        )
    seconds = time.perf_counter() - started
    markdown_path = converted.directory / "document.md"
    markdown = markdown_path.read_text()
    return DocumentRun(
        case=case,
        pages=_pages_from_manifest(converted.directory / "manifest.json"),
        seconds=seconds,
        markdown_path=markdown_path,
        scores=score_document(markdown, case.truth),
        invoice=None
        if case.truth.invoice_fields is None
        else score_invoice_file(converted.directory / "invoice.json", case.truth.invoice_fields),
    )


def _pages_from_manifest(path: Path) -> list[PageRun]:
    manifest = json.loads(path.read_text())
    return [
        PageRun(
            number=page["number"],
            engine=page["engine"],
            verdict=page["quality"]["verdict"],
            quality_score=page["quality"]["quality_score"],
            repair=page["quality"]["repair"],
            seconds=page["wall_seconds"],
        )
        for page in manifest["pages"]
    ]


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")[:80]
