"""A GPU worker for tests on machines without a GPU: the production Celery app and
ocr stage, with the vLLM engine replaced by a scripted double. Start it with
`celery -A tests.support.gpu_double_app worker --queues ...ocr-gpu`. Production
code never imports this module, so the double cannot be selected there."""

from __future__ import annotations

from worker.celery_app import app
from worker.engines import registry
from worker.engines.base import EngineResult, PageInput

# What one jina-ocr-v1 page looks like on an L4: about 1,085 output tokens, FastMTP
# at 57.6 % acceptance over 3 drafted tokens a step.
DEVICE_SECONDS_PER_PAGE = 0.25
OUTPUT_TOKENS = 1085
DRAFTED, ACCEPTED, STEPS = 1188, 684, 396


class ScriptedGpuEngine:
    name = "vllm"
    render_dpi = 144

    def convert(self, page: PageInput) -> EngineResult:
        assert page.image_png.startswith(b"\x89PNG"), "the GPU engine reads the page image"
        return EngineResult(
            markdown=f"# Page {page.facts.number}\n\nTranscribed on the GPU double.",
            device_seconds=DEVICE_SECONDS_PER_PAGE,
            device_kind="gpu",
            prompt_tokens=300,
            output_tokens=OUTPUT_TOKENS,
            finish_reason="stop",
            details={
                "profile": "jina-ocr-v1",
                "queue_seconds": 0.01,
                "prefill_seconds": 0.02,
                "decode_seconds": 0.2,
                "spec": {"steps": STEPS, "draft_tokens": DRAFTED, "accepted_tokens": ACCEPTED},
                "repetition": {"retried": False},
            },
        )


registry._engines["vllm"] = ScriptedGpuEngine()
__all__ = ["app"]
