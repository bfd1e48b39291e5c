"""Documents and their ground truth in a folder, found by name.

For a document `name.pdf` (or `.png`, `.jpg`, `.jpeg`, `.tif`, `.tiff`, `.webp`):

- `name.md` or `name.txt`: the reference text (Markdown markup is ignored when scoring);
- `name.json`: invoice fields, an invoice2data-style record (an object, or a list holding
  one, whose values are strings, numbers, or lists of those or of line-item objects);
- `name.table.md`: the reference table (the first Markdown table in the file). Without
  one, a Markdown table in the reference text stands in.

References are looked for beside the document, then in a `groundtruth/` folder beside
the document's folder (`sources/name.pdf` with `groundtruth/name.md`). Folders are
searched recursively; a document with no reference at all is skipped and listed as such.
A document named `name.KIND.pdf`, KIND one of the scanned-variant kinds, is reported as
that variant of `name`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cli.evaluation.degrade import VARIANT_KINDS

DOCUMENT_SUFFIXES = frozenset({".pdf", ".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp"})
GROUND_TRUTH_FOLDER = "groundtruth"
ORIGINAL = "original"


@dataclass(frozen=True)
class GroundTruth:
    text: Path | None = None
    invoice_fields: Path | None = None
    table: Path | None = None

    @property
    def empty(self) -> bool:
        return self.text is None and self.invoice_fields is None and self.table is None


@dataclass(frozen=True)
class EvalCase:
    name: str  # the document's path relative to the folder evaluated
    document: Path
    variant: str  # "original", or the scanned-variant kind
    truth: GroundTruth


@dataclass
class Discovery:
    cases: list[EvalCase] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was skipped or ignored, and why


def discover(root: Path) -> Discovery:
    found = Discovery()
    for document in documents_under(root):
        truth, notes = find_ground_truth(document)
        name = document.relative_to(root).as_posix()
        found.notes.extend(f"{name}: {note}" for note in notes)
        if truth.empty:
            found.notes.append(f"{name}: skipped, no reference text, invoice fields or table")
            continue
        found.cases.append(EvalCase(name, document, variant_of(document), truth))
    return found


def documents_under(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        hidden = any(part.startswith(".") for part in path.relative_to(root).parts)
        if not hidden and path.is_file() and path.suffix.lower() in DOCUMENT_SUFFIXES:
            yield path


def variant_of(document: Path) -> str:
    kind = Path(document.stem).suffix.removeprefix(".")
    return kind if kind in VARIANT_KINDS else ORIGINAL


def find_ground_truth(document: Path) -> tuple[GroundTruth, list[str]]:
    """The reference files of one document, and notes on files that were not usable."""
    stem = document.stem
    notes: list[str] = []
    text = invoice_fields = table = None
    for folder in (document.parent, document.parent.parent / GROUND_TRUTH_FOLDER):
        text = text or _first_file(folder / f"{stem}.md", folder / f"{stem}.txt")
        table = table or _first_file(folder / f"{stem}.table.md")
        candidate = folder / f"{stem}.json"
        if invoice_fields is None and candidate.is_file():
            problem = invoice_record_problem(candidate)
            if problem is None:
                invoice_fields = candidate
            else:
                notes.append(f"{candidate.name} ignored: {problem}")
    return GroundTruth(text=text, invoice_fields=invoice_fields, table=table), notes


def _first_file(*candidates: Path) -> Path | None:
    return next((path for path in candidates if path.is_file()), None)


def load_invoice_fields(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def invoice_record_problem(path: Path) -> str | None:
    """Why a JSON file is not an invoice2data-style record, or None if it is one.

    Other tools keep JSON of their own beside their documents (layout trees, table cells);
    scoring those as invoice fields would count every coordinate as a field.
    """
    try:
        value = load_invoice_fields(path)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        return f"not readable JSON ({error})"
    if isinstance(value, list):
        if len(value) != 1:
            return "a list of invoice records must hold exactly one"
        value = value[0]
    if not isinstance(value, Mapping):
        return "not a JSON object of invoice fields"
    for key, item in value.items():
        if isinstance(item, list):
            if not all(_is_scalar(entry) or _is_flat_record(entry) for entry in item):
                return f"{key!r} is a list but not of values or flat line-item objects"
        elif not _is_scalar(item):
            return f"{key!r} holds an object, not an invoice field value"
    return None


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _is_flat_record(value: Any) -> bool:
    return isinstance(value, Mapping) and all(_is_scalar(item) for item in value.values())
