"""One engine instance per process and name, created on first use, as the catalogue
(pagemill.engines.catalog) says to build it.

Engines load models when created; creating them lazily keeps the API process and
Celery's parent process free of models (and, for GPU engines, of CUDA state that
does not survive a fork).
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

from pagemill.engines.catalog import LicenceBasis, engine_spec
from worker.engines.base import Engine

_engines: dict[str, Engine] = {}
_lock = threading.Lock()


def get_engine(name: str) -> Engine:
    with _lock:
        engine = _engines.get(name)
        if engine is None:
            engine = build_engine(name)
            _engines[name] = engine
        return engine


def created_engine(name: str) -> Engine | None:
    """The engine if this process has made it, without making it."""
    with _lock:
        return _engines.get(name)


def build_engine(name: str) -> Engine:
    """A new engine, apart from the one this process keeps."""
    engine: Engine = _resolve(engine_spec(name).factory)()
    return engine


def render_dpi_for(name: str) -> int:
    """The resolution an engine wants, without loading its models."""
    # Not from the engine classes: importing them loads PyMuPDF and the OCR models,
    # which a worker that only prepares pages never needs.
    declared = engine_spec(name).render_dpi
    return declared if isinstance(declared, int) else int(_resolve(declared)())


def licence_basis(name: str) -> LicenceBasis:
    """The model behind an engine and its licence, without loading anything."""
    declared = engine_spec(name).licence
    if isinstance(declared, LicenceBasis):
        return declared
    basis: LicenceBasis = _resolve(declared)()
    return basis


def _resolve(dotted: str) -> Any:
    module, _, attribute = dotted.partition(":")
    return getattr(importlib.import_module(module), attribute)
