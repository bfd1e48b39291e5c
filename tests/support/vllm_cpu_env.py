"""The environment vLLM's CPU build runs in for the tests and benchmarks.

vLLM reads these at import, so a process that imports vLLM itself calls
`apply()` first, and a parent that starts one passes `VLLM_CPU_ENV` on.
mk/gpu.mk sets the same variables for `make test-gpu`.
"""

from __future__ import annotations

import os

VLLM_CPU_ENV: dict[str, str] = {
    # Nothing may be downloaded: every model is built locally.
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    # GiB of KV cache; the tiny models need far less, and CI has 24 GiB.
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    # One process: the engine core runs in the caller, so its counters and
    # the time-share accountant see the same clock as the test.
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
}


def apply() -> None:
    """Set each variable unless the caller's environment already chose it."""
    for name, value in VLLM_CPU_ENV.items():
        os.environ.setdefault(name, value)
