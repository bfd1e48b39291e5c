"""Prepare records and queues its pages a few at a time.

A page's row costs a statement and its OCR message a Redis round trip; in batches, a
batch costs one of each. A page waits for its batch at most BATCH_WAIT_S (the render
child is asked between pages, and while it is silent), so the first pages of a long
document still reach the OCR workers while the rest render.

The fences are a page's, kept for the batch: each page's objects are written before
the statement that records it reads the purge fence, and a page is queued only once
its row is committed.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from pagemill.domain import QueuedPage
from pagemill.jobs import repository
from pagemill.storage import ObjectStore

log = logging.getLogger(__name__)

# A batch is recorded once it holds this many pages, or once its first page has
# waited this long, whichever comes first.
BATCH_PAGES = 8
BATCH_WAIT_S = 0.25
# How often a silent render child is looked away from, to record a batch that has waited.
IDLE_CHECK_S = 0.1

PublishOcrPages = Callable[[Sequence[QueuedPage]], None]


class JobEnded(Exception):
    """The job ended (cancelled, purged) while its pages were being prepared."""


@dataclass(frozen=True)
class PreparedPage:
    """A page whose objects are stored, its row not yet recorded."""

    row: dict[str, Any]  # the page's columns (license_use among them), job_id left out
    engine: str | None  # None: not to be queued (prepare routed it nowhere)
    written: list[str]  # the object keys stored for it


@dataclass
class PageBatches:
    store: ObjectStore
    recorder: Session  # an autocommit session (repository.autocommit)
    job_id: uuid.UUID
    publish: PublishOcrPages
    published: set[int] = field(default_factory=set)
    _pending: list[PreparedPage] = field(default_factory=list)
    _first_added: float = 0.0

    def add(self, page: PreparedPage) -> None:
        """Raises JobEnded when recording finds the job ended."""
        if not self._pending:
            self._first_added = time.monotonic()
        self._pending.append(page)
        if len(self._pending) >= BATCH_PAGES:
            self.flush()
        else:
            self.flush_if_waited()

    def flush_if_waited(self) -> None:
        if self._pending and time.monotonic() - self._first_added >= BATCH_WAIT_S:
            self.flush()

    def flush(self) -> None:
        """Record the pending pages and queue those recorded here. Raises JobEnded."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        recorded = repository.record_pages(self.recorder, self.job_id, [p.row for p in pending])
        written = [key for page in pending for key in page.written]
        if recorded.purge_started and written:
            self.store.remove_objects(written)
            log.info(
                "job %s is being purged; removed %d object(s) just written",
                self.job_id,
                len(written),
            )
        if not recorded.job_running:
            raise JobEnded()
        queued = [
            QueuedPage(recorded.page_ids[page.row["number"]], page.engine, page.row["license_use"])
            for page in pending
            # Not recorded here: an earlier attempt recorded it, and it is queued with
            # the rest once every page is recorded.
            if page.engine is not None and page.row["number"] in recorded.page_ids
        ]
        self.publish(queued)
        self.published.update(page.page_id for page in queued)
