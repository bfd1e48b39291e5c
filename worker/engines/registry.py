"""One engine instance per process and name, created on first use.

Engines load models when created; creating them lazily keeps the API process and
Celery's parent process free of models (and, for GPU engines, of CUDA state that
does not survive a fork).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from worker.engines.base import CPU_ENGINE_RENDER_DPI, Engine

if TYPE_CHECKING:
    from worker.engines.vllm.profiles import ModelProfile

_engines: dict[str, Engine] = {}
_lock = threading.Lock()

CPU_ENGINES = ("textlayer", "rapidocr")
GPU_ENGINES = ("vllm",)
OCR_ENGINES = ("rapidocr", "vllm")


@dataclass(frozen=True)
class LicenceBasis:
    """Under which licence an engine's model may be used."""

    model: str
    model_license: str  # SPDX identifier
    model_permits_commercial: bool


def get_engine(name: str) -> Engine:
    with _lock:
        engine = _engines.get(name)
        if engine is None:
            engine = _create(name)
            _engines[name] = engine
        return engine


def created_engine(name: str) -> Engine | None:
    """The engine if this process has made it, without making it."""
    with _lock:
        return _engines.get(name)


def _create(name: str) -> Engine:
    if name == "textlayer":
        from worker.engines.textlayer import TextLayerEngine

        return TextLayerEngine()
    if name == "rapidocr":
        from worker.engines.rapidocr import RapidOcrEngine

        return RapidOcrEngine()
    if name == "vllm":
        from worker.engines.vllm.engine import VllmEngine

        return VllmEngine()
    raise ValueError(f"unknown engine {name!r}")


def render_dpi_for(name: str) -> int:
    """The resolution an engine wants, without loading its models."""
    # Not from the engine classes: importing them loads PyMuPDF and the OCR models,
    # which a worker that only prepares pages never needs.
    if name in ("textlayer", "rapidocr"):
        return CPU_ENGINE_RENDER_DPI
    if name == "vllm":
        return _vllm_profile().render_dpi
    raise ValueError(f"unknown engine {name!r}")


def licence_basis(name: str) -> LicenceBasis:
    """The model behind an engine and its licence, without loading anything."""
    if name == "textlayer":
        # The text layer is read by PyMuPDF's own code and layout models.
        return LicenceBasis("pymupdf4llm (PyMuPDF 2.0)", "AGPL-3.0-or-later", True)
    if name == "rapidocr":
        # rapidocr and its bundled PP-OCR models are Apache-2.0.
        return LicenceBasis("rapidocr 3.10.0 PP-OCR", "Apache-2.0", True)
    if name == "vllm":
        profile = _vllm_profile()
        return LicenceBasis(profile.name, profile.licence, profile.commercial_use_permitted)
    raise ValueError(f"unknown engine {name!r}")


def _vllm_profile() -> ModelProfile:
    from worker.engines.vllm.profiles import get_profile
    from worker.engines.vllm.settings import VllmSettings

    return get_profile(VllmSettings().profile)
