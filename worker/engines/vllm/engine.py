"""The `vllm` engine: the Engine interface over an in-process AsyncLLM.

`convert()` is called from many Celery threads at once. Each call builds the
page's prompt, hands the request to the bridge's event-loop thread (which
owns the AsyncLLM) and blocks until that page's answer is back: N threads
blocked is N pages in the engine's continuous batch.

A page whose output loops or is cut short is retried once on the guarded,
non-speculative path; both attempts are recorded and both are charged.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from pagemill.documents.blocks import PageBlocks
from worker.bridge import EngineBridge, ShutdownReport
from worker.engines.base import EngineError, EngineResult, PageInput
from worker.engines.vllm.grounding import blocks_from_grounding, png_size
from worker.engines.vllm.inputs import build_prompt
from worker.engines.vllm.measurements import SpecCounters, SpecMetrics
from worker.engines.vllm.postprocess import to_markdown
from worker.engines.vllm.profiles import ModelProfile, get_profile
from worker.engines.vllm.repetition import LoopVerdict, detect_loop
from worker.engines.vllm.runner import Attempt, EngineFactory, EngineRunner
from worker.engines.vllm.settings import VllmSettings
from worker.engines.vllm.timeshare import TimeShareAccountant, Usage, to_ns

logger = logging.getLogger(__name__)


class VllmEngine:
    """Page image (or, for test models, a text prompt) in, Markdown out."""

    name = "vllm"

    def __init__(
        self,
        profile: ModelProfile | None = None,
        settings: VllmSettings | None = None,
        *,
        bridge: EngineBridge | None = None,
        engine_factory: EngineFactory | None = None,
    ) -> None:
        self.settings = settings or VllmSettings()
        self.profile = profile or get_profile(self.settings.profile)
        if (
            not self.profile.commercial_use_permitted
            and not self.settings.noncommercial_use_accepted
        ):
            raise EngineError(
                f"{self.profile.name} is licensed {self.profile.licence}, which forbids "
                "commercial use; set PAGEMILL_VLLM_NONCOMMERCIAL_USE_ACCEPTED=true to run it"
            )
        self.render_dpi = self.profile.render_dpi
        self.bridge = bridge or EngineBridge(name=f"vllm-{self.profile.name}")
        self.accountant = TimeShareAccountant(
            origin_ns=to_ns(time.monotonic()), device_count=self.settings.tensor_parallel_size
        )
        self.runner = EngineRunner(
            self.profile, self.settings, self.accountant, engine_factory=engine_factory
        )
        self.bridge.on_shutdown(self.runner.close)

    def start(self) -> None:
        """Start the engine now rather than on the first page (warm-up).

        Loading weights takes from seconds to minutes and must not count
        against any page's timeout, so `convert` waits for it first too.
        """
        if not self.runner.started:
            self.bridge.run(self.runner.ensure_started, timeout_s=None, count_in_flight=False)

    def convert(self, page: PageInput) -> EngineResult:
        self.start()
        prompt = build_prompt(self.profile, page)
        request_id = f"{self.profile.name}-p{page.facts.number}-{uuid.uuid4().hex[:12]}"
        first = self._attempt(prompt, request_id, guarded=self.runner.first_attempt_guarded)
        verdict = detect_loop(first.token_ids, first.finish_reason, self.profile.repetition)
        retry: Attempt | None = None
        if verdict.looping and not first.guarded and self.runner.can_retry_guarded:
            logger.info(
                "page %s looped (%s); retrying guarded", request_id, ",".join(verdict.reasons)
            )
            retry = self._attempt(prompt, f"{request_id}-guard", guarded=True)
        return self._result(first, verdict, retry, page)

    def shutdown(self, drain_timeout_s: float | None = None) -> ShutdownReport:
        """Drain pages in flight (up to the drain timeout), cancel the rest, stop vLLM.

        Callers of cancelled pages get BridgeClosed: re-queue those pages.
        """
        timeout = self.settings.drain_timeout_s if drain_timeout_s is None else drain_timeout_s
        return self.bridge.shutdown(drain_timeout_s=timeout)

    def spec_counters(self) -> SpecCounters:
        """Engine-wide speculative counters; subtract two for a window's acceptance."""
        return self.runner.spec_counters()

    def usage(self) -> Usage:
        """Busy, idle and charged device time so far (settled part)."""
        return self.accountant.usage()

    def _attempt(self, prompt: dict[str, Any], request_id: str, *, guarded: bool) -> Attempt:
        return self.bridge.run(
            lambda: self.runner.generate(prompt, guarded=guarded, request_id=request_id),
            timeout_s=self.settings.page_timeout_s,
        )

    def _result(
        self,
        first: Attempt,
        verdict: LoopVerdict,
        retry: Attempt | None,
        page: PageInput | None = None,
    ) -> EngineResult:
        final = retry or first
        markdown, meta = to_markdown(final.text, self.profile.output_format)
        attempts = [first] if retry is None else [first, retry]
        spec = sum(
            (a.measurement.spec for a in attempts if a.measurement.spec is not None),
            SpecMetrics(),
        )
        retry_verdict = (
            detect_loop(retry.token_ids, retry.finish_reason, self.profile.repetition)
            if retry
            else None
        )
        m = final.measurement
        details: dict[str, Any] = {
            "profile": self.profile.name,
            "licence": self.profile.licence,
            "commercial_use_permitted": self.profile.commercial_use_permitted,
            "path": m.path,
            "queue_seconds": m.queue_seconds,
            "prefill_seconds": m.prefill_seconds,
            "decode_seconds": m.decode_seconds,
            "device_seconds": sum(a.measurement.device_seconds for a in attempts),
            # The old name of device_seconds, kept for one release.
            "gpu_seconds": sum(a.measurement.device_seconds for a in attempts),
            "gpu_seconds_settled": all(a.measurement.gpu_settled for a in attempts),
            "spec": spec.as_dict() if spec.steps or self.runner.speculative else None,
            "repetition": {
                **verdict.as_dict(),
                "retried": retry is not None,
                "retry": retry_verdict.as_dict() if retry_verdict else None,
                "retry_finish_reason": retry.finish_reason if retry else None,
            },
            "attempts": [a.measurement.as_dict() for a in attempts],
        }
        if meta:
            details["model_metadata"] = meta
        return EngineResult(
            markdown=markdown,
            device_seconds=details["device_seconds"],
            device_kind=self.runner.device_kind,
            prompt_tokens=m.prompt_tokens,
            output_tokens=m.output_tokens,
            finish_reason=final.finish_reason,
            details=details,
            blocks=self._blocks(final.text, page),
        )

    def _blocks(self, raw: str, page: PageInput | None) -> PageBlocks | None:
        """Blocks where the profile grounds its answer in boxes; None otherwise.

        A profile without grounding gets no boxes from anywhere else: reading the page
        again with the CPU OCR engine for its boxes costs 1-3 CPU seconds a page, more
        than the GPU spends on it, and pages sent here seldom have a text layer."""
        if page is None or self.profile.output_format != "deepseek_grounding":
            return None
        size = png_size(page.image_png) if page.image_png else None
        points = 72 / page.image_dpi
        width_pt, height_pt = (
            (round(size[0] * points, 2), round(size[1] * points, 2))
            if size is not None
            else (page.facts.width_pt, page.facts.height_pt)
        )
        return blocks_from_grounding(raw, page.facts.number, width_pt, height_pt, self.name)
