"""Domain vocabulary shared by the API, the workers and the CLI."""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple


class JobStatus(StrEnum):
    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"
    # Ended, and its stored objects removed (retention or a purge request); the row stays
    # with its pages' cost and licence records.
    purged = "purged"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_JOB_STATUSES


TERMINAL_JOB_STATUSES = frozenset(
    {JobStatus.succeeded, JobStatus.failed, JobStatus.cancelled, JobStatus.purged}
)


class PageStatus(StrEnum):
    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"


TERMINAL_PAGE_STATUSES = frozenset({PageStatus.succeeded, PageStatus.failed, PageStatus.cancelled})


class LicenseUse(StrEnum):
    """Under which terms the caller uses the output: the model's weights may forbid one."""

    non_commercial = "non_commercial"
    commercial = "commercial"


class QueuedPage(NamedTuple):
    """A page to publish for OCR, with what picks its queue: the engine it was routed
    to ("" when prepare routed none) and the licence class it is processed under."""

    page_id: int
    engine: str
    license_use: LicenseUse | None


class SourceKind(StrEnum):
    pdf = "pdf"
    png = "png"
    jpeg = "jpeg"
    tiff = "tiff"
    webp = "webp"


class DeliveryStatus(StrEnum):
    """A webhook delivery's state."""

    pending = "pending"  # waiting for its next attempt (or in one)
    succeeded = "succeeded"  # a 2xx answer
    dead = "dead"  # retries used up, refused destination, or endpoint gone: for ops


class Stage(StrEnum):
    """Celery queues, one per stage, so CPU and GPU pools can consume different ones."""

    prepare = "prepare"
    ocr = "ocr"
    finalize = "finalize"


def human_size(size_bytes: int) -> str:
    """1536 -> "1.5 KiB": limits in messages people read."""
    value = float(size_bytes)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


class InputRejected(Exception):
    """Input that cannot become a job; nothing has been created for it. `code` is stable
    (callers branch on it), `message` a sentence for people, `http_status` the API's answer."""

    def __init__(self, code: str, message: str, http_status: int = 422) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.http_status = http_status
