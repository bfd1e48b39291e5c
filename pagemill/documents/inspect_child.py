"""Sandboxed child (see sandbox.run_sandboxed): args PATH MAX_SIDE_PT MAX_PIXELS
[REQUESTED_ENGINE]."""

from __future__ import annotations

from pathlib import Path

from pagemill.documents.inspect import DocumentRejected, facts_as_line, inspect_document
from pagemill.documents.sandbox import emit


def run(args: list[str]) -> None:
    path, max_side_pt, max_pixels = args[0], float(args[1]), int(args[2])
    requested_engine = args[3] if len(args) > 3 else None
    try:
        info = inspect_document(Path(path), max_side_pt, max_pixels, requested_engine)
    except DocumentRejected as rejected:
        emit({"error": rejected.code, "message": rejected.message, "status": rejected.http_status})
        return
    emit(
        {
            "kind": info.kind.value,
            "page_count": info.page_count,
            "extraction_restricted": info.extraction_restricted,
            "page_facts": [facts_as_line(facts) for facts in info.page_facts],
            "page_ink": list(info.page_ink),
            "page_blobs": list(info.page_blobs),
            "page_sizes": [None if size is None else list(size) for size in info.page_sizes],
        }
    )
