"""vLLM registration of a test OCR architecture with an MTP draft of its own.

It does what a model's registration step must do on vLLM 0.32 for a new
architecture with built-in MTP layers (jina-ocr-v1's FastMTP is one):

1. register the target architecture named in the checkpoint's config.json;
2. register the draft architecture that runs the MTP layer;
3. teach vLLM's speculative config to map the first to the second. With
   `speculative_config={"method": "mtp"}` and no draft `model`, vLLM builds
   the draft's config from the target checkpoint and rewrites its
   architecture in `SpeculativeConfig.hf_config_override`, which knows only
   the architectures vLLM ships. There is no registry for this mapping in
   0.32, so the plugin wraps that function.
4. name the target's image token as `image_token_index` (see models.py):
   the MTP proposer looks it up by class name for vLLM's own classes only.

Class paths are strings: vLLM imports them lazily, so registering touches no
CUDA in a parent process. Loading may happen more than once per process
(vLLM's rule for general plugins), so every step is idempotent.
"""

from __future__ import annotations

from typing import Any

TARGET_ARCH = "PagemillTestOcrForConditionalGeneration"
DRAFT_ARCH = "PagemillTestOcrMTPModel"
_MODELS = "pagemill_test_vllm_plugin.models"


def register() -> None:
    from vllm import ModelRegistry
    from vllm.config.speculative import SpeculativeConfig

    if TARGET_ARCH not in ModelRegistry.get_supported_archs():
        ModelRegistry.register_model(TARGET_ARCH, f"{_MODELS}:PagemillTestOcr")
        ModelRegistry.register_model(DRAFT_ARCH, f"{_MODELS}:PagemillTestOcrMTP")
    if (
        getattr(SpeculativeConfig.hf_config_override, "__name__", "")
        != "hf_config_override_with_test_ocr"
    ):
        global _vllm_override
        _vllm_override = SpeculativeConfig.hf_config_override
        SpeculativeConfig.hf_config_override = staticmethod(hf_config_override_with_test_ocr)


_vllm_override: Any = None


def hf_config_override_with_test_ocr(hf_config: Any) -> Any:
    """vLLM's own mapping, plus: the test architecture's MTP layer runs as DRAFT_ARCH."""
    architectures = getattr(hf_config, "architectures", None) or []
    if architectures[:1] == [TARGET_ARCH]:
        hf_config.model_type = "glm_ocr_mtp"
        hf_config.update(
            {
                "num_hidden_layers": 0,
                "n_predict": getattr(hf_config, "num_nextn_predict_layers", None),
                "architectures": [DRAFT_ARCH],
            }
        )
        return hf_config
    return _vllm_override(hf_config)
