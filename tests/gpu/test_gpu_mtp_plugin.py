"""The FastMTP registration path: an architecture vLLM learns from a plugin.

jina-ocr-v1's FastMTP needs a registration step that teaches vLLM the
model's architecture and its MTP draft. The test package in plugin_pkg/
(installed into .venv-vllm by scripts/install-vllm-cpu.sh) does that through
the `vllm.general_plugins` entry point, for an architecture name vLLM does not
ship. A copy of the tiny GLM-OCR whose config.json names that architecture is
then loaded by the engine as any deployment loads its model, with one draft
block applied recursively to draft three tokens a step, as FastMTP does.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from glm_runs import acceptance_sums, run_glm_ocr, sample_pages

pytestmark = pytest.mark.timeout(600)

TARGET_ARCH = "PagemillTestOcrForConditionalGeneration"


def test_the_entry_point_registers_the_architecture_and_its_draft() -> None:
    from importlib.metadata import entry_points

    from vllm import ModelRegistry
    from vllm.plugins import load_general_plugins

    [plugin] = [
        e for e in entry_points(group="vllm.general_plugins") if e.name == "pagemill_test_ocr"
    ]
    assert plugin.value == "pagemill_test_vllm_plugin:register"
    load_general_plugins()
    archs = ModelRegistry.get_supported_archs()
    assert {TARGET_ARCH, "PagemillTestOcrMTPModel"} <= set(archs)


def test_the_engine_loads_the_registered_architecture_and_speculates_with_it(
    tiny_glm_ocr: Any, tmp_path: Path
) -> None:
    folder = tmp_path / "registered"
    shutil.copytree(tiny_glm_ocr.with_mtp("follow").path, folder)
    config = json.loads((folder / "config.json").read_text())
    config["architectures"] = [TARGET_ARCH]
    (folder / "config.json").write_text(json.dumps(config))
    record = tmp_path / "built.txt"

    with pytest.MonkeyPatch.context() as env:
        env.setenv("PAGEMILL_VLLM_NUM_SPECULATIVE_TOKENS", "3")
        env.setenv("PAGEMILL_TEST_PLUGIN_RECORD", str(record))
        run = run_glm_ocr(folder, {"pdf": sample_pages()["pdf"]})

    # vLLM built both models from the plugin's classes.
    assert record.read_text().split() == ["PagemillTestOcr", "PagemillTestOcrMTP"]
    [result] = run.results.values()
    assert result.finish_reason == "stop"
    assert result.output_tokens == len(tiny_glm_ocr.answer_token_ids)
    steps, drafted, accepted = acceptance_sums(run)
    assert (run.counters.drafts, run.counters.draft_tokens, run.counters.accepted_tokens) == (
        steps,
        drafted,
        accepted,
    )
    # One draft block, applied three times a step: three drafts per step, and
    # this block (rigged to follow the target) gets nearly all accepted.
    assert drafted == 3 * steps
    assert accepted / drafted >= 0.9
    assert len(run.counters.accepted_per_position) == 3
    print(f"registered MTP, K=3: {steps} steps, {accepted}/{drafted} accepted")
