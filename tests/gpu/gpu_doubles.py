"""A scripted stand-in for vLLM's AsyncLLM: the one edge we cannot run here
at production scale.

It speaks the slice of AsyncLLM the runner uses (`generate` as an async
iterator of RequestOutput-shaped objects with engine timestamps, and
`shutdown`) and schedules like vLLM does: one step loop advances every
running request together, admitting waiting requests into free slots of a
`max_num_seqs` batch at each step. The batch size is recorded at every step:
that, not a momentary count between two pages, is what the decoder sees.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from worker.bridge import InFlightGauge
from worker.engines.base import PageFacts, PageInput
from worker.engines.vllm.profiles import ModelProfile, RepetitionSpec

PAGE_NUMBER = re.compile(r"page (\d+)")
# The batch the double schedules, and how long one attempt may take, in the
# Celery bridge tests.
MAX_NUM_SEQS = 32
PAGE_TIMEOUT_S = 5.0


def scan_page(number: int, image: bytes = b"", dpi: int = 72) -> PageInput:
    """A page as the GPU engine receives a scan: an image-only A4 page. Text profiles
    read only its number (`page {n}`), so the image may be empty."""
    facts = PageFacts.image_only(number, width_pt=595, height_pt=842)
    return PageInput(facts=facts, image_png=image, image_dpi=dpi)


def scripted_profile(name: str, detect_min_repeats: int) -> ModelProfile:
    """The model profile the scripted stand-in plays: a text prompt naming the page."""
    return ModelProfile(
        name=name,
        weights_subdir="unused",
        source="tests/gpu/gpu_doubles.py",
        licence="MIT",
        commercial_use_permitted=True,
        input_kind="text",
        prompt="page {page_number}",
        render_dpi=72,
        repetition=RepetitionSpec(detect_ngram_size=4, detect_min_repeats=detect_min_repeats),
    )


class ScriptedFailure(RuntimeError):
    """Raised by the double for a page scripted to fail."""


@dataclass
class Script:
    """What each page does, by page number and attempt (0 = first)."""

    seconds: Callable[[int], float]
    fail_first_attempt: frozenset[int] = frozenset()
    # A runaway page keeps producing tokens and never finishes, until the
    # bridge's page timeout cancels it.
    hang_first_attempt: frozenset[int] = frozenset()
    tokens_per_step: int = 4
    step_seconds: float = 0.02


@dataclass
class _Metrics:
    queued_ts: float
    scheduled_ts: float = 0.0
    first_token_ts: float = 0.0
    last_token_ts: float = 0.0
    num_generation_tokens: int = 0
    num_preemptions: int = 0


@dataclass
class _Completion:
    text: str
    token_ids: list[int]
    finish_reason: str | None = None
    spec_decode_metrics: Any = None


@dataclass
class _Output:
    request_id: str
    outputs: list[_Completion]
    metrics: _Metrics
    prompt_token_ids: list[int]
    finished: bool = False


@dataclass
class _Request:
    request_id: str
    page: int
    attempt: int
    metrics: _Metrics
    outputs: asyncio.Queue[_Output | Exception]
    deadline: float = 0.0
    produced: int = 0


@dataclass
class ScriptedAsyncLLM:
    script: Script
    max_num_seqs: int
    gauge: InFlightGauge = field(default_factory=InFlightGauge)  # batch size per step
    attempts: dict[int, int] = field(default_factory=dict)
    shut_down: bool = False
    on_admit: Callable[[int], None] | None = None  # called as a page enters the batch
    _waiting: list[_Request] = field(default_factory=list)
    _running: dict[str, _Request] = field(default_factory=dict)
    _stepper: asyncio.Task[None] | None = None

    async def generate(
        self, prompt: dict[str, Any], params: Any, request_id: str
    ) -> AsyncIterator[_Output]:
        match = PAGE_NUMBER.search(prompt["prompt"])
        assert match is not None, prompt
        page = int(match.group(1))
        attempt = self.attempts.get(page, 0)
        self.attempts[page] = attempt + 1
        request = _Request(request_id, page, attempt, _Metrics(time.monotonic()), asyncio.Queue())
        self._waiting.append(request)
        if self._stepper is None:
            self._stepper = asyncio.create_task(self._step_loop())
        try:
            while True:
                item = await request.outputs.get()
                if isinstance(item, Exception):
                    raise item
                yield item
                if item.finished:
                    return
        finally:
            # Finished, failed or cancelled (the bridge's timeout): like
            # vLLM's abort, the request leaves the batch at once.
            self._running.pop(request_id, None)
            if request in self._waiting:
                self._waiting.remove(request)

    async def _step_loop(self) -> None:
        script = self.script
        while True:
            await asyncio.sleep(script.step_seconds)
            now = time.monotonic()
            while self._waiting and len(self._running) < self.max_num_seqs:
                request = self._waiting.pop(0)
                request.metrics.scheduled_ts = now
                request.deadline = now + script.seconds(request.page)
                self._running[request.request_id] = request
                if self.on_admit is not None:
                    self.on_admit(request.page)
            self.gauge.add(len(self._running) - self.gauge.value)
            for request in list(self._running.values()):
                self._advance(request, now)

    def _advance(self, request: _Request, now: float) -> None:
        script = self.script
        first_attempt = request.attempt == 0
        if first_attempt and request.page in script.fail_first_attempt:
            del self._running[request.request_id]
            request.outputs.put_nowait(ScriptedFailure(f"page {request.page} fails once"))
            return
        runaway = first_attempt and request.page in script.hang_first_attempt
        finished = now >= request.deadline and not runaway
        new = list(range(request.produced, request.produced + script.tokens_per_step))
        request.produced += len(new)
        metrics = request.metrics
        metrics.first_token_ts = metrics.first_token_ts or now
        metrics.last_token_ts = now
        metrics.num_generation_tokens = request.produced
        completion = _Completion(
            text=f"page {request.page} " if request.produced == len(new) else "",
            token_ids=new,
            finish_reason="stop" if finished else None,
        )
        request.outputs.put_nowait(
            _Output(request.request_id, [completion], metrics, [1, 2, 3], finished)
        )
        if finished:
            del self._running[request.request_id]

    def shutdown(self) -> None:
        self.shut_down = True
        if self._stepper is not None:
            self._stepper.cancel()
