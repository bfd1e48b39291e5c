"""Figure 7 (projection): pages/s and dollars per 1,000 pages per GPU for
jina-ocr-v1 on an L4 and an A100, from the published engine figures and the
service overhead measured in figure 1.

Published figures (the model card's comparison):
- A100 40GB: 2.57 pages/s at concurrency 32; olmOCR-2 1.22 and chandra-ocr-2
  0.38 pages/s on the same GPU in the same comparison.
- L4: 83.1 tokens/s with FastMTP (42.7 without), about 1,085 tokens a page.
  That is a single-stream decode speed: 0.077 pages/s per sequence. No batched
  L4 figure is published, so the L4 row is that single-stream rate, a floor,
  not a batch throughput.

The service's own CPU per page (figure 1) sets how many host cores one GPU
needs: pages/s x CPU s/page. The projected rate is the engine's rate unless
the host's cores per GPU cannot keep up. Prices per hour and cores per GPU are
inputs: PAGEMILL_BENCH_PRICE_L4, PAGEMILL_BENCH_PRICE_A100 ($/h),
PAGEMILL_BENCH_CORES_L4, PAGEMILL_BENCH_CORES_A100.
"""

from __future__ import annotations

import os
from typing import Any

TOKENS_PER_PAGE = 1085
A100_PAGES_PER_S = 2.57
L4_TOKENS_PER_S = {"fastmtp": 83.1, "plain": 42.7}
OTHERS_A100 = {"olmOCR-2": 1.22, "chandra-ocr-2": 0.38}


def _env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


def run(cpu_ms_per_page: float | None) -> dict[str, dict[str, Any]]:
    price = {
        "L4": _env_float("PAGEMILL_BENCH_PRICE_L4", 0.80),
        "A100 40GB": _env_float("PAGEMILL_BENCH_PRICE_A100", 1.50),
    }
    cores = {
        "L4": _env_float("PAGEMILL_BENCH_CORES_L4", 8),
        "A100 40GB": _env_float("PAGEMILL_BENCH_CORES_A100", 12),
    }
    cpu_s = (cpu_ms_per_page or 0.0) / 1000
    engines = [
        ("jina-ocr-v1", "A100 40GB", A100_PAGES_PER_S, "published, concurrency 32"),
        (
            "jina-ocr-v1 (FastMTP)",
            "L4",
            L4_TOKENS_PER_S["fastmtp"] / TOKENS_PER_PAGE,
            "83.1 tok/s / 1,085 tok/page, single stream (floor)",
        ),
        (
            "jina-ocr-v1 (no speculation)",
            "L4",
            L4_TOKENS_PER_S["plain"] / TOKENS_PER_PAGE,
            "42.7 tok/s / 1,085 tok/page, single stream (floor)",
        ),
        *[(name, "A100 40GB", rate, "published") for name, rate in OTHERS_A100.items()],
    ]
    rows = []
    for model, gpu, engine_rate, basis in engines:
        host_limit = cores[gpu] / cpu_s if cpu_s else float("inf")
        rate = min(engine_rate, host_limit)
        rows.append(
            {
                "model": model,
                "gpu": gpu,
                "basis": basis,
                "engine_pages_per_s": engine_rate,
                "host_cores_needed": engine_rate * cpu_s,
                "host_cores_assumed": cores[gpu],
                "pages_per_s": rate,
                "price_usd_per_hour": price[gpu],
                "usd_per_1000_pages": price[gpu] / (rate * 3600) * 1000,
                "gpu_seconds_per_page": 1 / rate,
            }
        )
    return {
        "projection": {
            "title": "Projection",
            "unit": "pages/s and $ per 1,000 pages, per GPU",
            "inputs": "published engine figures; service CPU ms/page from the orchestration "
            "figure; prices and host cores per GPU overridable by environment",
            "service_cpu_ms_per_page": cpu_ms_per_page,
            "rows": rows,
        }
    }
