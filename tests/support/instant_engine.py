"""The instant text-layer engine of tests/support/instant_app.py, apart from the module
that installs it: importing this changes nothing, so a test process may read its figures
without replacing the engines its own in-process tests use."""

from __future__ import annotations

from pagemill.engines.catalog import TEXT_LAYER_ENGINE
from worker.engines.base import EngineResult, PageInput

# At the tests' 3.60 USD a device-hour, a page costs 0.00025 USD.
DEVICE_SECONDS_PER_PAGE = 0.25


class InstantTextLayerEngine:
    name = TEXT_LAYER_ENGINE
    render_dpi = 150

    def convert(self, page: PageInput) -> EngineResult:
        return EngineResult(
            markdown=f"# Page {page.facts.number}\n\nA fixed page from the instant engine.\n",
            device_seconds=DEVICE_SECONDS_PER_PAGE,
            device_kind="cpu",
            finish_reason="stop",
        )
