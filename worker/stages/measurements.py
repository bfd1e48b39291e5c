"""Engine measurements that have their own page columns, taken from EngineResult.details.

The GPU engine reports queue, prefill and decode time from vLLM's request metrics
and its speculative decoding counts; the whole `details` is stored as well.
"""

from __future__ import annotations

from typing import Any


def gpu_measurements(details: dict[str, Any]) -> dict[str, Any]:
    spec = details.get("spec") or {}
    repetition = details.get("repetition") or {}
    return {
        "queue_seconds": details.get("queue_seconds"),
        "prefill_seconds": details.get("prefill_seconds"),
        "decode_seconds": details.get("decode_seconds"),
        "spec_steps": spec.get("steps"),
        "spec_draft_tokens": spec.get("draft_tokens"),
        "spec_accepted_tokens": spec.get("accepted_tokens"),
        "repetition_retried": repetition.get("retried"),
    }
