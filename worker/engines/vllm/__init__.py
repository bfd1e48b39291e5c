"""The vLLM GPU engine. Importing this package does not import vLLM: the
engine, its profiles and settings load anywhere; vLLM itself is imported
only when an engine starts (the `gpu` extra, or .venv-vllm for tests)."""

from worker.engines.vllm.engine import VllmEngine
from worker.engines.vllm.profiles import PROFILES, ModelProfile, get_profile
from worker.engines.vllm.settings import VllmSettings

__all__ = ["PROFILES", "ModelProfile", "VllmEngine", "VllmSettings", "get_profile"]
