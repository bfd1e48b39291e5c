"""Settings of the vLLM engine and the GPU worker that runs it.

Kept apart from pagemill's main settings so the GPU worker's environment
(.venv-vllm, no web stack) can load them; they can be merged later. Every
field reads `PAGEMILL_VLLM_<FIELD>` from the environment.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# Two GPU engines share one device when speculation is on (the second runs
# the non-speculative repetition retry); vLLM needs some memory for itself.
MAX_TOTAL_GPU_MEMORY_UTILIZATION = 0.95


class VllmSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PAGEMILL_VLLM_", extra="ignore")

    profile: str = Field(
        "jina-ocr-v1",
        description="Model profile name (see worker/engines/vllm/profiles.py).",
    )
    weights_dir: Path = Field(
        Path("/models"),
        description="Folder holding one sub-folder of weights per profile "
        "(e.g. /models/jina-ocr-v1). Local only: nothing is downloaded.",
    )
    weights_path: Path | None = Field(
        None,
        description="Exact weights folder; overrides weights_dir/<profile folder>.",
    )
    max_num_seqs: int = Field(
        32,
        ge=1,
        description="Pages decoded together by one engine. The worker's thread "
        "pool must be at least this big or the batch never fills.",
    )
    gpu_memory_utilization: float = Field(
        0.6,
        gt=0,
        le=MAX_TOTAL_GPU_MEMORY_UTILIZATION,
        description="Share of GPU memory for the main engine (weights + KV cache).",
    )
    guard_gpu_memory_utilization: float = Field(
        0.3,
        ge=0,
        le=MAX_TOTAL_GPU_MEMORY_UTILIZATION,
        description="Share for the non-speculative engine that retries looping "
        "pages, started on first need. 0 turns the retry off when speculation "
        "is on (looping pages are then only flagged).",
    )
    guard_max_num_seqs: int = Field(
        8, ge=1, description="Pages the retry engine decodes together; retries are rare."
    )
    max_model_len: int = Field(
        8192,
        ge=256,
        description="Prompt + output tokens per page; jina-ocr-v1 pages average "
        "about 1,085 output tokens and up to 1,156 vision tokens.",
    )
    enable_speculation: bool = Field(
        True, description="Use the profile's speculative decoding (FastMTP for jina-ocr-v1)."
    )
    num_speculative_tokens: int | None = Field(
        None, ge=1, description="Override the profile's draft length K."
    )
    enforce_eager: bool = Field(
        False,
        description="Run the model eagerly: no CUDA graphs, no torch.compile. Slower "
        "decoding, a faster start and less memory; the tests on vLLM's CPU build set it "
        "to skip compiling at every engine start.",
    )
    tensor_parallel_size: int = Field(
        1, ge=1, description="GPUs one engine spans; GPU seconds are multiplied by it."
    )
    noncommercial_use_accepted: bool = Field(
        False,
        description="Must be true to load a profile whose licence forbids "
        "commercial use (jina-ocr-v1 is CC BY-NC 4.0).",
    )
    page_timeout_s: float = Field(
        240.0,
        gt=0,
        description="Longest one attempt at one page may take before it is "
        "cancelled and the task retries it. At 40 tokens/s per sequence a "
        "1,085-token page takes about 30 s.",
    )
    task_time_limit_s: int = Field(
        600,
        gt=0,
        description="Hard limit of the ocr task. Celery's threads pool does not "
        "enforce it, so page_timeout_s is what actually stops a page.",
    )
    broker_visibility_timeout_s: int = Field(
        3600,
        gt=0,
        description="Redis visibility timeout: an unacknowledged task is handed "
        "to another worker after this long.",
    )
    drain_timeout_s: float = Field(
        120.0,
        ge=0,
        description="On shutdown, how long pages in flight may finish before "
        "they are cancelled and re-queued.",
    )
    progress_interval_tokens: int = Field(
        4,
        ge=1,
        description="Tokens between progress outputs per page; the time-share "
        "accountant settles at that granularity.",
    )
    settle_timeout_s: float = Field(
        2.0,
        ge=0,
        description="How long a finished page waits for the accountant to make "
        "its GPU seconds final before settling with what is known.",
    )

    @model_validator(mode="after")
    def _refuse_broken_combinations(self) -> VllmSettings:
        if self.task_time_limit_s >= self.broker_visibility_timeout_s:
            # Otherwise Redis hands a still-running page to a second worker
            # and the page is converted (and billed) twice.
            raise ValueError(
                "task_time_limit_s must be below broker_visibility_timeout_s "
                f"({self.task_time_limit_s} >= {self.broker_visibility_timeout_s})"
            )
        if 2 * self.page_timeout_s >= self.task_time_limit_s:
            # A page may take two attempts (speculative, then the guarded retry).
            raise ValueError("two page attempts (2 x page_timeout_s) must fit in task_time_limit_s")
        total = self.gpu_memory_utilization
        if self.enable_speculation:
            total += self.guard_gpu_memory_utilization
        if total > MAX_TOTAL_GPU_MEMORY_UTILIZATION:
            raise ValueError(
                "gpu_memory_utilization + guard_gpu_memory_utilization must not "
                f"exceed {MAX_TOTAL_GPU_MEMORY_UTILIZATION} (got {total:.2f})"
            )
        return self

    def resolve_weights(self, weights_subdir: str) -> Path:
        """The local folder holding the profile's weights."""
        return self.weights_path or self.weights_dir / weights_subdir
