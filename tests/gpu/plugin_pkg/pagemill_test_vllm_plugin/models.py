"""The registered classes: GLM-OCR's, under another name, recording their use.

A real registration points at the model's own code; these reuse vLLM's
GLM-OCR classes so the tiny GLM-OCR checkpoint can stand in for the model.
vLLM builds models in its engine-core process, so each class notes that it
was built in the file named by PAGEMILL_TEST_PLUGIN_RECORD, when set.
"""

from __future__ import annotations

import os

from vllm.config import VllmConfig
from vllm.model_executor.models.glm_ocr import GlmOcrForConditionalGeneration
from vllm.model_executor.models.glm_ocr_mtp import GlmOcrMTP


def _record(name: str) -> None:
    record = os.environ.get("PAGEMILL_TEST_PLUGIN_RECORD")
    if record:
        with open(record, "a", encoding="utf-8") as sink:
            sink.write(name + "\n")


class PagemillTestOcr(GlmOcrForConditionalGeneration):
    def __init__(self, *, vllm_config: VllmConfig, prefix: str = "") -> None:
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        # vLLM 0.32's MTP proposer finds a multimodal target's image token
        # under `image_token_id` only for the classes it ships (by class
        # name); any other target must offer `image_token_index`.
        self.config.image_token_index = self.config.image_token_id
        _record(type(self).__name__)


class PagemillTestOcrMTP(GlmOcrMTP):
    def __init__(self, *, vllm_config: VllmConfig, prefix: str = "") -> None:
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        _record(type(self).__name__)
