"""Inspecting uploads in the API process: a few at a time, each in a sandboxed child.

Inspection is CPU work in child processes; run without a bound, a crowd of uploads
shares the cores until every one of them passes its time limit. So at most
`inspect_concurrency` run at once, and an upload waits at most
`inspect_queue_wait_s` for its turn: one that does not get it, or whose inspection
the machine was too busy to run, answers 503 `busy`, never a 4xx about the document.
Waiting holds no thread and no database connection.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import anyio
from fastapi.concurrency import run_in_threadpool

from api.errors import ApiError
from pagemill.documents.inspect import DocumentInfo, InspectionBusy, inspect_untrusted
from pagemill.settings import Settings


class InspectionGate:
    def __init__(self, slots: int, wait_s: float) -> None:
        self._slots = anyio.Semaphore(slots)
        self._wait_s = wait_s

    async def inspect(
        self, path: Path, settings: Settings, requested_engine: str | None = None
    ) -> DocumentInfo:
        """The upload's kind and page count, and its pages measured for the quote of a job
        asking for `requested_engine`; raises DocumentRejected or InspectionBusy."""
        admitted = False
        with anyio.move_on_after(self._wait_s):
            await self._slots.acquire()
            admitted = True
        if not admitted:
            raise InspectionBusy(
                f"no inspection slot came free within {self._wait_s:g} s: too many uploads at once"
            )
        try:
            return await run_in_threadpool(inspect_untrusted, path, settings, requested_engine)
        finally:
            self._slots.release()


@lru_cache(maxsize=1)
def get_inspection_gate(slots: int, wait_s: float) -> InspectionGate:
    # One per process, made inside the event loop on the first upload.
    return InspectionGate(slots, wait_s)


def busy_error(settings: Settings, reason: str) -> ApiError:
    retry_after_s = max(1, math.ceil(settings.inspect_queue_wait_s))
    return ApiError(
        503,
        "busy",
        f"The service is too busy to check this upload now ({reason}); nothing was "
        f"stored. Send it again in {retry_after_s} s.",
        headers={"Retry-After": str(retry_after_s)},
    )
