"""What a document is, from its first bytes: shared by upload inspection and the
worker's fetch of a source URL, which must not load the document libraries."""

from __future__ import annotations

from pagemill.domain import SourceKind

_MAGIC: list[tuple[bytes, SourceKind]] = [
    (b"%PDF-", SourceKind.pdf),
    (b"\x89PNG\r\n\x1a\n", SourceKind.png),
    (b"\xff\xd8\xff", SourceKind.jpeg),
    (b"II*\x00", SourceKind.tiff),
    (b"MM\x00*", SourceKind.tiff),
]

# How many leading bytes sniff_kind looks at.
SNIFF_BYTES = 1024

CONTENT_TYPES = {
    SourceKind.pdf: "application/pdf",
    SourceKind.png: "image/png",
    SourceKind.jpeg: "image/jpeg",
    SourceKind.tiff: "image/tiff",
    SourceKind.webp: "image/webp",
}

UNSUPPORTED_TYPE_MESSAGE = "The file is not a PDF or a PNG, JPEG, TIFF or WebP image."


def sniff_kind(head: bytes) -> SourceKind | None:
    """The document type from its first bytes, or None when it is not one we take."""
    # PDF readers accept the header anywhere in the first KiB, and so do we.
    if b"%PDF-" in head[:SNIFF_BYTES]:
        return SourceKind.pdf
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return SourceKind.webp
    return None
