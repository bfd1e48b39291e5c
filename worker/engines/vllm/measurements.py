"""What one attempt at a page cost, read from vLLM's RequestOutput, and the
engine-wide speculative decoding counters.

Per request (V1): `RequestOutput.metrics` holds the engine core's monotonic
timestamps (queued, scheduled, first token, last token); they are filled only
when stats logging is on. `outputs[0].spec_decode_metrics` (with
per_request_spec_decode_metrics="summary") holds the request's draft and
acceptance counts. Engine-wide: the Prometheus counters
vllm:spec_decode_num_drafts, _num_draft_tokens, _num_accepted_tokens and
_num_accepted_tokens_per_pos, which restart at zero with each engine.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from worker.engines.vllm.timeshare import NS_PER_S

AttemptPath = Literal["speculative", "plain", "guarded"]


@dataclass(frozen=True)
class SpecMetrics:
    """Speculative decoding for one request, or summed over many."""

    steps: int = 0  # verification steps that had drafts ("drafts" in vLLM's counters)
    draft_tokens: int = 0
    accepted_tokens: int = 0

    @property
    def acceptance_rate(self) -> float:
        """Accepted / drafted: the share of drafted tokens the target kept."""
        return self.accepted_tokens / self.draft_tokens if self.draft_tokens else 0.0

    @property
    def tokens_per_step(self) -> float:
        """Tokens committed per verification step: 1 + accepted / steps."""
        return 1.0 + self.accepted_tokens / self.steps if self.steps else 1.0

    def __add__(self, other: SpecMetrics) -> SpecMetrics:
        return SpecMetrics(
            self.steps + other.steps,
            self.draft_tokens + other.draft_tokens,
            self.accepted_tokens + other.accepted_tokens,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "draft_tokens": self.draft_tokens,
            "accepted_tokens": self.accepted_tokens,
            "acceptance_rate": self.acceptance_rate,
            "tokens_per_step": self.tokens_per_step,
        }


@dataclass(frozen=True)
class AttemptMeasurement:
    request_id: str
    path: AttemptPath
    prompt_tokens: int
    output_tokens: int
    finish_reason: str | None
    queue_seconds: float | None  # waiting in the engine's scheduler
    prefill_seconds: float | None  # scheduled to first token
    decode_seconds: float | None  # first to last token
    admission_wait_seconds: float  # waiting for a batch slot before the engine saw it
    spec: SpecMetrics | None
    device_ns: int  # time-share charge, device-nanoseconds
    gpu_settled: bool  # False when the charge was settled by force (see timeshare)
    acceptance_histogram: list[int] = field(default_factory=list)

    @property
    def device_seconds(self) -> float:
        return self.device_ns / NS_PER_S

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["spec"] = self.spec.as_dict() if self.spec is not None else None
        data["device_seconds"] = self.device_seconds
        # The old names, kept for one release: pages stored before the rename have only them.
        data["gpu_ns"] = self.device_ns
        data["gpu_seconds"] = self.device_seconds
        return data


def spec_from_output(completion: Any) -> tuple[SpecMetrics | None, list[int]]:
    """The request's own speculative decoding numbers, if the engine kept them."""
    metrics = getattr(completion, "spec_decode_metrics", None)
    if metrics is None:
        return None, []
    data = metrics.to_dict()
    return (
        SpecMetrics(
            steps=int(data["num_spec_steps"]),
            draft_tokens=int(data["num_draft_tokens"]),
            accepted_tokens=int(data["num_accepted_draft_tokens"]),
        ),
        list(data.get("acceptance_histogram", [])),
    )


def stage_seconds(metrics: Any) -> tuple[float | None, float | None, float | None]:
    """Queue, prefill and decode seconds from RequestStateStats (engine clock)."""
    if metrics is None or not metrics.scheduled_ts:
        return None, None, None
    queue = max(metrics.scheduled_ts - metrics.queued_ts, 0.0)
    prefill = max(metrics.first_token_ts - metrics.scheduled_ts, 0.0)
    decode = max(metrics.last_token_ts - metrics.first_token_ts, 0.0)
    return queue, prefill, decode


@dataclass(frozen=True)
class SpecCounters:
    """vLLM's engine-wide speculative decoding counters; subtract for a window."""

    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    accepted_per_position: tuple[int, ...] = ()

    def __sub__(self, earlier: SpecCounters) -> SpecCounters:
        positions = [
            a - (earlier.accepted_per_position[i] if i < len(earlier.accepted_per_position) else 0)
            for i, a in enumerate(self.accepted_per_position)
        ]
        return SpecCounters(
            self.drafts - earlier.drafts,
            self.draft_tokens - earlier.draft_tokens,
            self.accepted_tokens - earlier.accepted_tokens,
            tuple(positions),
        )

    def as_spec(self) -> SpecMetrics:
        return SpecMetrics(self.drafts, self.draft_tokens, self.accepted_tokens)


_COUNTER_FIELDS = {
    "vllm:spec_decode_num_drafts": "drafts",
    "vllm:spec_decode_num_draft_tokens": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens": "accepted_tokens",
}


def read_spec_counters(model_name: str) -> SpecCounters:
    """The engine's counters, from vLLM's in-process Prometheus registry."""
    from vllm.v1.metrics.reader import (  # type: ignore[import-not-found]
        Counter,
        Vector,
        get_metrics_snapshot,
    )

    values: dict[str, int] = {}
    per_position: tuple[int, ...] = ()
    for metric in get_metrics_snapshot():
        if metric.labels.get("model_name") != model_name:
            continue
        if isinstance(metric, Counter) and metric.name in _COUNTER_FIELDS:
            key = _COUNTER_FIELDS[metric.name]
            values[key] = values.get(key, 0) + int(metric.value)
        elif (
            isinstance(metric, Vector)
            and metric.name == "vllm:spec_decode_num_accepted_tokens_per_pos"
        ):
            per_position = tuple(int(v) for v in metric.values)
    return SpecCounters(accepted_per_position=per_position, **values)
