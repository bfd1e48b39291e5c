"""Sandboxed child: `python -m pagemill.documents.inspect_child PATH MAX_SIDE_PT MAX_PIXELS`."""

from __future__ import annotations

import sys
from pathlib import Path

from pagemill.documents.sandbox import apply_limits_from_env, emit


def main() -> None:
    apply_limits_from_env()
    from pagemill.documents.inspect import DocumentRejected, inspect_document

    path, max_side_pt, max_pixels = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    try:
        info = inspect_document(Path(path), max_side_pt, max_pixels)
    except DocumentRejected as rejected:
        emit({"error": rejected.code, "message": rejected.message, "status": rejected.http_status})
        return
    emit({"kind": info.kind.value, "page_count": info.page_count})


if __name__ == "__main__":
    main()
