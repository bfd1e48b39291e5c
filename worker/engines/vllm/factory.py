"""Building vLLM engines: their arguments, and the calls that import vLLM.

Everything that imports vLLM is a function called on a worker thread at
engine start, so importing pagemill never imports vLLM (or torch).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from worker.engines.base import EngineError
from worker.engines.vllm.profiles import ModelProfile
from worker.engines.vllm.settings import VllmSettings


def engine_kwargs(
    profile: ModelProfile, settings: VllmSettings, *, guard_engine: bool
) -> tuple[dict[str, Any], list[Any]]:
    """AsyncEngineArgs for the main or the guard engine, and its stat loggers."""
    weights = settings.resolve_weights(profile.weights_subdir)
    if not weights.is_dir():
        # Local weights only: a hub id here would make vLLM try to download.
        raise EngineError(f"model weights not found at {weights} (set PAGEMILL_VLLM_WEIGHTS_DIR)")
    speculative = (
        bool(profile.speculative_config) and settings.enable_speculation and not guard_engine
    )
    spec_config = None
    if speculative:
        k = settings.num_speculative_tokens
        spec_config = (profile.with_speculative_tokens(k) if k else profile).speculative_config
    kwargs: dict[str, Any] = {
        "model": str(Path(weights)),
        "served_model_name": f"{profile.name}-guard" if guard_engine else profile.name,
        "max_num_seqs": settings.guard_max_num_seqs if guard_engine else settings.max_num_seqs,
        "gpu_memory_utilization": (
            settings.guard_gpu_memory_utilization
            if guard_engine
            else settings.gpu_memory_utilization
        ),
        "max_model_len": settings.max_model_len,
        "tensor_parallel_size": settings.tensor_parallel_size,
        "seed": 0,
        # Per-request timings exist only with stats on.
        "disable_log_stats": guard_engine,
        "speculative_config": spec_config,
        "per_request_spec_decode_metrics": "summary" if speculative else "none",
        **profile.engine_kwargs,
    }
    if settings.enforce_eager:
        kwargs["enforce_eager"] = True
    if not speculative and profile.repetition.guard_logits_processor:
        kwargs["logits_processors"] = [profile.repetition.guard_logits_processor]
    stat_loggers: list[Any] = []
    if guard_engine:
        # Every engine with stats on registers Prometheus collectors and first
        # unregisters all existing vllm:* ones, which would wipe the main
        # engine's counters. The guard keeps per-request timings through a
        # stand-in logger and leaves the registry alone.
        stat_loggers.append(_quiet_prometheus_logger())
    return kwargs, stat_loggers


def _stay_offline() -> None:
    # Weights are local; never let a missing file turn into a download. Read
    # by huggingface_hub when first imported, so set before importing vLLM.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def create_async_llm(kwargs: dict[str, Any], stat_loggers: list[Any]) -> Any:
    _stay_offline()
    from vllm.engine.arg_utils import AsyncEngineArgs  # type: ignore[import-not-found]
    from vllm.v1.engine.async_llm import AsyncLLM  # type: ignore[import-not-found]

    args = AsyncEngineArgs(**kwargs)
    return AsyncLLM.from_engine_args(args, stat_loggers=stat_loggers or None)


def load_api() -> tuple[Any, Any]:
    _stay_offline()
    from vllm import SamplingParams  # type: ignore[import-not-found]
    from vllm.sampling_params import RequestOutputKind  # type: ignore[import-not-found]

    return SamplingParams, RequestOutputKind


def _quiet_prometheus_logger() -> Any:
    from vllm.v1.metrics.loggers import PrometheusStatLogger  # type: ignore[import-not-found]

    class QuietPrometheusStatLogger(PrometheusStatLogger):  # type: ignore[misc]
        """Counts as the Prometheus logger so vLLM adds none; records nothing."""

        def __init__(self, vllm_config: Any, engine_indexes: list[int] | None = None) -> None:
            self.engine_indexes = engine_indexes or [0]

        def record(self, *args: Any, **kwargs: Any) -> None:
            pass

        def record_sleep_state(self, *args: Any, **kwargs: Any) -> None:
            pass

        def log_engine_initialized(self) -> None:
            pass

        def log(self) -> None:
            pass

    return QuietPrometheusStatLogger


def device_kind() -> str:
    from vllm.platforms import current_platform  # type: ignore[import-not-found]

    return "cpu" if current_platform.is_cpu() else "gpu"
