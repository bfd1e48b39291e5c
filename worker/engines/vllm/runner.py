"""The async side of the vLLM engine: owns the AsyncLLM instances.

Everything here runs on the bridge's event-loop thread. AsyncLLM is created
lazily, inside the worker process that uses it: vLLM starts an EngineCore
child process and initialises CUDA, neither of which survives a fork, so it
must never exist in a parent that forks (Celery prefork) or at import time.

Two engines at most share the device:

* main: the profile's speculative decoding when enabled, unguarded (vLLM
  refuses custom logits processors together with speculation); or, without
  speculation, plain decoding with the n-gram guard on every request.
* guard: plain decoding with the guard, for retrying looping pages, started
  on first need when the main engine speculates.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from worker.engines.base import EngineError
from worker.engines.vllm.factory import create_async_llm, device_kind, engine_kwargs, load_api
from worker.engines.vllm.measurements import (
    AttemptMeasurement,
    AttemptPath,
    SpecCounters,
    read_spec_counters,
    spec_from_output,
    stage_seconds,
)
from worker.engines.vllm.profiles import ModelProfile
from worker.engines.vllm.settings import VllmSettings
from worker.engines.vllm.timeshare import TimeShareAccountant, to_ns

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Attempt:
    text: str
    token_ids: list[int]
    finish_reason: str | None
    measurement: AttemptMeasurement

    @property
    def guarded(self) -> bool:
        return self.measurement.path == "guarded"


@dataclass
class _Slot:
    """One AsyncLLM and the admission limit in front of it."""

    llm: Any
    admission: asyncio.Semaphore
    speculative: bool


@dataclass
class _Changed:
    """Wakes coroutines waiting for the accountant to settle further."""

    event: asyncio.Event = field(default_factory=asyncio.Event)

    def notify(self) -> None:
        self.event.set()
        self.event = asyncio.Event()


EngineFactory = Callable[[dict[str, Any], list[Any]], Any]


class EngineRunner:
    def __init__(
        self,
        profile: ModelProfile,
        settings: VllmSettings,
        accountant: TimeShareAccountant,
        *,
        engine_factory: EngineFactory | None = None,
    ) -> None:
        self.profile = profile
        self.settings = settings
        self.accountant = accountant
        self._factory = engine_factory or create_async_llm
        self._main: _Slot | None = None
        self._guard: _Slot | None = None
        self._main_lock: asyncio.Lock | None = None
        self._guard_lock: asyncio.Lock | None = None
        self._changed: _Changed | None = None
        self.speculative = bool(profile.speculative_config) and settings.enable_speculation
        self.device_kind = "gpu"
        self._api: tuple[Any, Any] | None = None  # SamplingParams, RequestOutputKind
        self._creating: set[asyncio.Future[Any]] = set()
        self._engines: list[Any] = []  # every engine started, for close()

    @property
    def first_attempt_guarded(self) -> bool:
        """Without speculation the guard runs from the start, as the models' recipes do."""
        return not self.speculative

    @property
    def can_retry_guarded(self) -> bool:
        return self.speculative and self.settings.guard_gpu_memory_utilization > 0

    async def generate(self, prompt: dict[str, Any], *, guarded: bool, request_id: str) -> Attempt:
        slot = await self._slot(guarded)
        path: AttemptPath = (
            "speculative" if slot.speculative else ("guarded" if guarded else "plain")
        )
        params = self._sampling_params(guarded and not slot.speculative)
        asked = time.monotonic()
        async with slot.admission:
            admitted = time.monotonic()
            final, text, token_ids = await self._stream(slot, prompt, params, request_id, admitted)
        device_ns, settled = await self._charge(request_id, final)
        completion = final.outputs[0]
        spec, histogram = spec_from_output(completion)
        queue_s, prefill_s, decode_s = stage_seconds(final.metrics)
        measurement = AttemptMeasurement(
            request_id=request_id,
            path=path,
            prompt_tokens=len(final.prompt_token_ids or ()),
            output_tokens=len(token_ids),
            finish_reason=completion.finish_reason,
            queue_seconds=queue_s,
            prefill_seconds=prefill_s,
            decode_seconds=decode_s,
            admission_wait_seconds=admitted - asked,
            spec=spec,
            device_ns=device_ns,
            gpu_settled=settled,
            acceptance_histogram=histogram,
        )
        return Attempt(text, token_ids, completion.finish_reason, measurement)

    async def _stream(
        self, slot: _Slot, prompt: dict[str, Any], params: Any, request_id: str, admitted: float
    ) -> tuple[Any, str, list[int]]:
        """Run one request, reporting its start and progress to the accountant."""
        accountant, changed = self.accountant, self._notifier()
        accountant.open(request_id, to_ns(admitted))
        text: list[str] = []
        token_ids: list[int] = []
        final = None
        try:
            async for output in slot.llm.generate(prompt, params, request_id):
                metrics = output.metrics
                if metrics is not None and metrics.scheduled_ts:
                    accountant.begin(request_id, to_ns(metrics.scheduled_ts))
                    accountant.progress(request_id, to_ns(metrics.last_token_ts))
                completion = output.outputs[0]
                text.append(completion.text)
                token_ids.extend(completion.token_ids)
                final = output
                changed.notify()
        finally:
            if final is not None and final.finished and final.metrics is not None:
                accountant.end(request_id, to_ns(final.metrics.last_token_ts))
            else:
                # Cancelled (timeout, shutdown) or failed: the engine aborts the
                # request now, so it held the device until now.
                accountant.abandon(request_id, to_ns(time.monotonic()))
            changed.notify()
        if final is None or final.metrics is None:
            raise EngineError("the engine returned no output or no timings (is stats logging on?)")
        return final, "".join(text), token_ids

    async def _charge(self, request_id: str, final: Any) -> tuple[int, bool]:
        """Wait until the page's GPU seconds are final; force it after a while."""
        deadline = time.monotonic() + self.settings.settle_timeout_s
        changed = self._notifier()
        # Let the other pages' consumers take the outputs already delivered
        # with this step, so their ends are known before this page settles.
        await asyncio.sleep(0)
        while True:
            self.accountant.settle()
            charge = self.accountant.take(request_id)
            if charge is not None:
                return charge, True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            waiter = changed.event
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter.wait(), timeout=min(remaining, 0.05))
        # Someone held the watermark back too long (a page queued inside the
        # engine, say); settle up to this page's end with what is known.
        self.accountant.settle(force_until_ns=to_ns(final.metrics.last_token_ts))
        charge = self.accountant.take(request_id)
        return (charge or 0), False

    def _notifier(self) -> _Changed:
        if self._changed is None:
            self._changed = _Changed()
        return self._changed

    def _sampling_params(self, guarded: bool) -> Any:
        assert self._api is not None, "vLLM's API is loaded when the engine starts"
        sampling_params, output_kind = self._api
        spec = self.profile.sampling
        return sampling_params(
            temperature=spec.temperature,
            max_tokens=spec.max_tokens,
            skip_special_tokens=spec.skip_special_tokens,
            stop_token_ids=list(spec.stop_token_ids) or None,
            extra_args=self.profile.repetition.guard_extra_args() if guarded else None,
            # Deltas, not the whole text every step: a 1,000-token page would
            # otherwise copy its output a thousand times.
            output_kind=output_kind.DELTA,
            # Progress outputs every few tokens are what lets the time-share
            # accountant settle; every token would wake this loop too often.
            stream_interval=self.settings.progress_interval_tokens,
        )

    @property
    def started(self) -> bool:
        return self._main is not None

    async def ensure_started(self) -> None:
        await self._slot(guarded=False)

    async def _slot(self, guarded: bool) -> _Slot:
        main = await self._main_slot()
        if not guarded or not main.speculative:
            return main
        if not self.can_retry_guarded:
            raise EngineError("the guarded retry is switched off")
        return await self._guard_slot()

    async def _main_slot(self) -> _Slot:
        if self._main is None:
            self._main_lock = self._main_lock or asyncio.Lock()
            async with self._main_lock:
                if self._main is None:
                    self._main = await self._start(guard_engine=False)
                    self.accountant.restart(to_ns(time.monotonic()))
        return self._main

    async def _guard_slot(self) -> _Slot:
        # A lock of its own: the main engine keeps taking pages while the
        # retry engine loads (tens of seconds on a GPU).
        if self._guard is None:
            self._guard_lock = self._guard_lock or asyncio.Lock()
            async with self._guard_lock:
                if self._guard is None:
                    self._guard = await self._start(guard_engine=True)
        return self._guard

    async def _start(self, *, guard_engine: bool) -> _Slot:
        speculative = self.speculative and not guard_engine
        kwargs, stat_loggers = engine_kwargs(self.profile, self.settings, guard_engine=guard_engine)
        started = time.monotonic()
        # Off the loop: importing vLLM and loading weights take seconds to
        # minutes, and pages already on the main engine must keep streaming.
        if self._api is None:
            self._api = await asyncio.to_thread(load_api)
            self.device_kind = await asyncio.to_thread(device_kind)
        creating = asyncio.ensure_future(asyncio.to_thread(self._factory, kwargs, stat_loggers))
        self._creating.add(creating)
        # A shutdown may cancel this wait, but not the thread building the
        # engine: close() waits for that thread and shuts its engine down.
        llm = await asyncio.shield(creating)
        self._creating.discard(creating)
        self._engines.append(llm)
        logger.info(
            "vLLM engine %s ready in %.1f s (speculative=%s)",
            kwargs["served_model_name"],
            time.monotonic() - started,
            speculative,
        )
        limit = self.settings.guard_max_num_seqs if guard_engine else self.settings.max_num_seqs
        # Admitting no more than the engine batches keeps vLLM's own waiting
        # queue empty, so every request it holds has started; the time-share
        # watermark then never waits on a page stuck in that queue.
        return _Slot(llm, asyncio.Semaphore(limit), speculative)

    def spec_counters(self) -> SpecCounters:
        return read_spec_counters(self.profile.name)

    async def close(self) -> None:
        """Shut every engine down, including one still being built."""
        for creating in list(self._creating):
            try:
                self._engines.append(await creating)
            except Exception:
                logger.exception("an engine failed to start during shutdown")
        self._creating.clear()
        self._guard = self._main = None
        engines, self._engines = self._engines, []
        for llm in reversed(engines):
            # Stop AsyncLLM's output handler (a task on this loop) first, or it
            # sees the engine core go away and logs the clean stop as a failure.
            handler = getattr(llm, "output_handler", None)
            if isinstance(handler, asyncio.Task):
                handler.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await handler
            await asyncio.to_thread(llm.shutdown)
