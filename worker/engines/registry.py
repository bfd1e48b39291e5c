"""One engine instance per process and name, created on first use.

Engines load models when created; creating them lazily keeps the API process and
Celery's parent process free of models (and, for GPU engines, of CUDA state that
does not survive a fork).
"""

from __future__ import annotations

import threading

from worker.engines.base import Engine

_engines: dict[str, Engine] = {}
_lock = threading.Lock()

CPU_ENGINES = ("textlayer", "rapidocr")


def get_engine(name: str) -> Engine:
    with _lock:
        engine = _engines.get(name)
        if engine is None:
            engine = _create(name)
            _engines[name] = engine
        return engine


def _create(name: str) -> Engine:
    if name == "textlayer":
        from worker.engines.textlayer import TextLayerEngine

        return TextLayerEngine()
    if name == "rapidocr":
        from worker.engines.rapidocr import RapidOcrEngine

        return RapidOcrEngine()
    raise ValueError(f"unknown engine {name!r}")


def render_dpi_for(name: str) -> int:
    """The resolution an engine wants, without loading its models."""
    if name == "textlayer":
        from worker.engines.textlayer import TextLayerEngine

        return TextLayerEngine.render_dpi
    if name == "rapidocr":
        from worker.engines.rapidocr import RapidOcrEngine

        return RapidOcrEngine.render_dpi
    raise ValueError(f"unknown engine {name!r}")
