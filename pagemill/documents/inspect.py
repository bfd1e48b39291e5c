"""Decide what an upload is and whether it can be processed, before any job exists.

The type comes from the file's first bytes, never from its name or the client's
content type.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pymupdf
from PIL import Image, ImageSequence

from pagemill.documents.facts import (
    TextLayerFacts,
    drawn_paths,
    image_ink_blobs,
    image_ink_fraction,
    ink_blobs,
    ink_fraction,
    text_layer_facts,
)
from pagemill.documents.kinds import (
    CONTENT_TYPES as CONTENT_TYPES,  # re-exported: the submit service stores with it
)
from pagemill.documents.kinds import (
    SNIFF_BYTES,
    UNSUPPORTED_TYPE_MESSAGE,
    sniff_kind,
)
from pagemill.documents.sandbox import (
    DocumentVerdict,
    Limits,
    SandboxFailed,
    SandboxStarved,
    run_sandboxed,
)
from pagemill.domain import InputRejected, SourceKind
from pagemill.engines.catalog import AUTO, TEXT_LAYER_ENGINE
from pagemill.routing import route_page
from pagemill.settings import Settings

# Measuring each page (its text layer, its ink) is only for the quote: it stops after this
# long, so a long document does not hold its upload back (the pages left are quoted at
# the mean of those measured; pagemill.accounting.quote).
FACTS_BUDGET_S = 2.0
# A longer document is measured at this many pages, spread evenly from its first to its
# last: the quote prices the pages left at the mean of those measured, and a document's
# pages are mostly alike. Measuring a page costs about as much API CPU as the rest of its
# way through the service, so the quote of a long document would otherwise cost more
# than its orchestration.
MEASURED_PAGES_MAX = 8
# A page drawing more than this is left unmeasured: tracing its text would cost about as
# much as drawing it (pagemill.settings textlayer_max_content_bytes is the same idea).
FACTS_MAX_CONTENT_BYTES = 1024**2


class DocumentRejected(InputRejected):
    """An uploaded file that cannot become a job: its type, damage, encryption or size."""


class InspectionBusy(Exception):
    """The upload could not be inspected now for want of capacity, not for anything in
    it: the same upload may well be accepted later."""


@dataclass(frozen=True)
class DocumentInfo:
    kind: SourceKind
    page_count: int
    # A PDF that opens without a password but whose owner withheld the permission to
    # copy or extract its text: accepted, and the restriction reported with the job.
    extraction_restricted: bool = False
    # Each PDF page's text layer as routing reads it, in page order; None for a page not
    # measured, and nothing past the last page measured. Empty for images.
    page_facts: tuple[TextLayerFacts | None, ...] = ()
    # Each page's ink (pagemill.documents.facts.ink_fraction), PDF pages and image frames
    # alike, with the same gaps as page_facts.
    page_ink: tuple[float | None, ...] = ()
    # Each page's ink blobs (pagemill.documents.facts.ink_blobs), counted for image frames
    # and for the PDF pages `auto` would send to OCR; gaps as page_ink.
    page_blobs: tuple[int | None, ...] = ()
    # Each page's size: (width, height) in points for a PDF page, in pixels for an image
    # frame; the quote prices OCR by the pixels it will read. Gaps as page_ink.
    page_sizes: tuple[tuple[float, float] | None, ...] = ()

    def facts_of(self, number: int) -> TextLayerFacts | None:
        """Page `number`'s (1-based) text layer facts, None when inspection cannot tell."""
        return self.page_facts[number - 1] if number <= len(self.page_facts) else None

    def ink_of(self, number: int) -> float | None:
        """Page `number`'s (1-based) ink, None when inspection did not measure it."""
        return self.page_ink[number - 1] if number <= len(self.page_ink) else None

    def blobs_of(self, number: int) -> int | None:
        """Page `number`'s (1-based) ink blobs, None when inspection did not count them."""
        return self.page_blobs[number - 1] if number <= len(self.page_blobs) else None

    def size_of(self, number: int) -> tuple[float, float] | None:
        """Page `number`'s (1-based) size, None when inspection did not measure it."""
        return self.page_sizes[number - 1] if number <= len(self.page_sizes) else None


def sniff_file(path: Path) -> SourceKind:
    """The cheap checks, safe in any process: not empty, a type we take."""
    if path.stat().st_size == 0:
        raise DocumentRejected("empty_file", "The uploaded file is empty.", 422)
    with path.open("rb") as handle:
        kind = sniff_kind(handle.read(SNIFF_BYTES))
    if kind is None:
        raise DocumentRejected(
            "unsupported_type",
            UNSUPPORTED_TYPE_MESSAGE,
            415,
        )
    return kind


def inspect_document(
    path: Path,
    max_page_side_pt: float = 14_400,
    max_image_pixels: int = 100_000_000,
    requested_engine: str | None = None,
) -> DocumentInfo:
    """Open the file as its magic bytes say and check it can be rendered.

    `requested_engine` is the engine the job asks for, when known: a PDF page it would
    read from its text layer is then not drawn for its ink, which only OCR's price uses
    (None: every measured page is drawn).

    Parses untrusted bytes: call it in a sandboxed child (`inspect_untrusted`)."""
    kind = sniff_file(path)
    if kind is SourceKind.pdf:
        return _inspect_pdf(path, max_page_side_pt, requested_engine)
    page_count = _inspect_image(path, kind, max_image_pixels)
    frames = _measure_frames(path)
    return DocumentInfo(
        kind=kind,
        page_count=page_count,
        page_ink=frames.inks,
        page_blobs=frames.blobs,
        page_sizes=frames.sizes,
    )


def _inspect_pdf(path: Path, max_page_side_pt: float, requested_engine: str | None) -> DocumentInfo:
    try:
        document = pymupdf.open(str(path), filetype="pdf")
    except Exception as error:
        raise _damaged(SourceKind.pdf) from error
    with document:
        # An encrypted PDF whose user password is empty opens here as in any reader
        # (PyMuPDF tries the empty password); only one that needs a password is refused.
        if document.needs_pass:
            raise DocumentRejected(
                "encrypted_document",
                "The PDF needs a password to open; upload it without the password.",
            )
        if document.page_count < 1:
            raise _damaged(SourceKind.pdf)
        if document.is_repaired and not _first_page_renders(document):
            raise _damaged(SourceKind.pdf)
        sizes = []
        for index in range(document.page_count):
            box = _page_rect(document, index)
            sizes.append((float(box.width), float(box.height)))
            if max(box.width, box.height) > max_page_side_pt:
                raise DocumentRejected(
                    "page_too_large",
                    f"Page {index + 1} is {box.width:.0f} x {box.height:.0f} points; the "
                    f"largest page side accepted is {max_page_side_pt:.0f} points.",
                )
        measured = _measure_pages(document, requested_engine)
        return DocumentInfo(
            kind=SourceKind.pdf,
            page_count=int(document.page_count),
            extraction_restricted=not document.permissions & pymupdf.mupdf.PDF_PERM_COPY,
            page_facts=measured.facts,
            page_ink=measured.inks,
            page_blobs=measured.blobs,
            page_sizes=tuple(sizes),
        )


@dataclass
class _Measured:
    """What inspection measured of each page, in page order, None where it could not."""

    facts: list[TextLayerFacts | None] = field(default_factory=list)
    inks: list[float | None] = field(default_factory=list)
    blobs: list[int | None] = field(default_factory=list)
    sizes: list[tuple[float, float] | None] = field(default_factory=list)

    def add(
        self,
        facts: TextLayerFacts | None = None,
        ink: float | None = None,
        blobs: int | None = None,
    ) -> None:
        self.facts.append(facts)
        self.inks.append(ink)
        self.blobs.append(blobs)

    def frames(self) -> _Frames:
        return _Frames(tuple(self.inks), tuple(self.blobs), tuple(self.sizes))


@dataclass(frozen=True)
class _Pages:
    facts: tuple[TextLayerFacts | None, ...]
    inks: tuple[float | None, ...]
    blobs: tuple[int | None, ...]


@dataclass(frozen=True)
class _Frames:
    inks: tuple[float | None, ...]
    blobs: tuple[int | None, ...]
    sizes: tuple[tuple[float, float] | None, ...]


def _measure_pages(document: pymupdf.Document, requested_engine: str | None) -> _Pages:
    deadline = time.monotonic() + FACTS_BUDGET_S
    measured = _Measured()
    sampled = measured_page_indexes(document.page_count)
    for index in range(document.page_count):
        if time.monotonic() > deadline:
            break
        if index in sampled:
            _measure_page(document, index, deadline, measured, requested_engine)
        else:
            measured.add()
    return _Pages(tuple(measured.facts), tuple(measured.inks), tuple(measured.blobs))


def measured_page_indexes(page_count: int, most: int = MEASURED_PAGES_MAX) -> frozenset[int]:
    """The 0-based indexes of the pages inspection measures: all of a short document's,
    `most` spread evenly over a longer one's, its first and last among them."""
    if page_count <= most:
        return frozenset(range(page_count))
    step = (page_count - 1) / (most - 1)
    return frozenset(round(i * step) for i in range(most))


def _measure_page(
    document: pymupdf.Document,
    index: int,
    deadline: float,
    measured: _Measured,
    requested_engine: str | None,
) -> None:
    # The page renders (checked above); what cannot be measured of it is unknown.
    # Each measure only where the quote will price the page by it: its paths where the
    # text layer engine reads it, its ink where OCR does (both when the engine is not
    # known).
    try:
        page = document.load_page(index)
        content_bytes = len(page.read_contents())
        if content_bytes > FACTS_MAX_CONTENT_BYTES:
            measured.add()
            return
        facts = text_layer_facts(page, count_paths=False)
        by_text_layer = _read_from_text_layer(requested_engine, facts)
        unknown = requested_engine is None
        if by_text_layer or unknown:
            facts = replace(facts, drawn_paths=drawn_paths(page, content_bytes))
    except Exception:
        measured.add()
        return
    # Drawing the page is the dearer half: left out once the budget is spent.
    if time.monotonic() > deadline or (by_text_layer and not unknown):
        measured.add(facts)
        return
    try:
        ink = ink_fraction(page)
        # Blobs only where OCR will most likely read the page: a page read from its text
        # layer is priced by its lines. (Which OCR engine does not matter here.)
        read_by_ocr = route_page(AUTO, facts, True, AUTO).engine != TEXT_LAYER_ENGINE
        blobs = ink_blobs(page) if read_by_ocr and time.monotonic() <= deadline else None
    except Exception:
        measured.add(facts)
        return
    measured.add(facts, ink, blobs)


def _read_from_text_layer(requested_engine: str | None, facts: TextLayerFacts) -> bool:
    """Whether a job asking for `requested_engine` reads the page from its text layer
    (None, an engine not known: as `auto` would)."""
    requested = AUTO if requested_engine is None else requested_engine
    return route_page(requested, facts, True, AUTO).engine == TEXT_LAYER_ENGINE


def _measure_frames(path: Path) -> _Frames:
    deadline = time.monotonic() + FACTS_BUDGET_S
    measured = _Measured()
    try:
        with Image.open(path) as image:
            for frame in ImageSequence.Iterator(image):
                if time.monotonic() > deadline:
                    break
                size = (float(frame.width), float(frame.height))
                measured.add(ink=image_ink_fraction(frame), blobs=image_ink_blobs(frame))
                measured.sizes.append(size)
    except Exception:
        # Checked above; a frame that will not decode now is simply not measured.
        return measured.frames()
    return measured.frames()


def _page_rect(document: pymupdf.Document, index: int) -> pymupdf.Rect:
    # The page as the renderer will draw it: its CropBox scaled by /UserUnit (which
    # the box alone leaves out) and turned by /Rotate.
    try:
        return document.load_page(index).rect
    except Exception as error:
        raise _damaged(SourceKind.pdf) from error


def _inspect_image(path: Path, kind: SourceKind, max_image_pixels: int) -> int:
    try:
        with Image.open(path) as image:
            image.verify()
        # verify() leaves the file unusable, and reads only the first frame: every
        # frame of a TIFF or MPO has its own size, and each becomes a page.
        with Image.open(path) as image:
            frames = 0
            for frame in ImageSequence.Iterator(image):
                frames += 1
                _check_frame_pixels(frame, frames, max_image_pixels)
    except DocumentRejected:
        raise
    except Image.DecompressionBombError as error:
        raise DocumentRejected(
            "image_too_large", "The image has too many pixels to process safely."
        ) from error
    except Exception as error:
        raise _damaged(kind) from error
    return frames


def _check_frame_pixels(frame: Image.Image, number: int, max_image_pixels: int) -> None:
    if frame.width * frame.height > max_image_pixels:
        where = "The image" if number == 1 else f"Page {number} of the image"
        raise DocumentRejected(
            "image_too_large",
            f"{where} is {frame.width} x {frame.height} pixels; the limit is "
            f"{max_image_pixels:,} pixels.",
        )


def _damaged(kind: SourceKind) -> DocumentRejected:
    return DocumentRejected(
        "unreadable_document", f"The {kind.value.upper()} file cannot be opened: it is damaged."
    )


def _first_page_renders(document: pymupdf.Document) -> bool:
    # A repaired PDF can still be fine; one whose first page will not even load is not.
    try:
        document.load_page(0).get_pixmap(dpi=10)
    except Exception:
        return False
    return True


def inspect_untrusted(
    path: Path, settings: Settings, requested_engine: str | None = None
) -> DocumentInfo:
    """inspect_document in a sandboxed child; a crash or hang rejects the upload, a
    child the machine was too busy to run raises InspectionBusy."""
    sniff_file(path)
    limits = Limits(
        settings.sandbox_memory_bytes, settings.sandbox_cpu_s, settings.inspect_timeout_s
    )
    args = [str(path), str(settings.max_page_side_pt), str(settings.max_image_pixels)]
    if requested_engine is not None:
        args.append(requested_engine)
    try:
        [line] = list(run_sandboxed("pagemill.documents.inspect_child", args, limits))
    except DocumentVerdict as verdict:
        raise DocumentRejected(verdict.code, verdict.message, verdict.http_status) from None
    except SandboxStarved as starved:
        raise InspectionBusy(str(starved)) from None
    except SandboxFailed as failure:
        raise DocumentRejected(
            "unreadable_document", f"The document cannot be processed safely: {failure}."
        ) from None
    return DocumentInfo(
        kind=SourceKind(line["kind"]),
        page_count=int(line["page_count"]),
        extraction_restricted=bool(line["extraction_restricted"]),
        page_facts=tuple(_facts_from_line(entry) for entry in line.get("page_facts", [])),
        page_ink=tuple(None if ink is None else float(ink) for ink in line.get("page_ink", [])),
        page_blobs=tuple(
            None if blobs is None else int(blobs) for blobs in line.get("page_blobs", [])
        ),
        page_sizes=tuple(_size_from_line(size) for size in line.get("page_sizes", [])),
    )


def facts_as_line(facts: TextLayerFacts | None) -> list[Any] | None:
    """A page's facts as the sandboxed child sends them."""
    if facts is None:
        return None
    return [
        facts.text_chars,
        facts.unreadable_chars,
        facts.invisible_text_chars,
        facts.image_coverage,
        facts.draws_nothing,
        facts.text_lines,
        facts.side_by_side_share,
        facts.words,
        facts.drawn_paths,
    ]


def _facts_from_line(entry: list[Any] | None) -> TextLayerFacts | None:
    if entry is None:
        return None
    (text_chars, unreadable, invisible, coverage, draws_nothing) = entry[:5]
    text_lines, side_by_side, words, paths = entry[5:]
    return TextLayerFacts(
        int(text_chars),
        int(unreadable),
        int(invisible),
        float(coverage),
        bool(draws_nothing),
        _int_or_none(text_lines),
        None if side_by_side is None else float(side_by_side),
        _int_or_none(words),
        _int_or_none(paths),
    )


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _size_from_line(entry: list[float] | None) -> tuple[float, float] | None:
    return None if entry is None else (float(entry[0]), float(entry[1]))
