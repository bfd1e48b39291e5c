"""ONNX Runtime sessions on the thread count the settings give (cpu_engine_threads).

The text layer engine reads a page with pymupdf's layout models (through pymupdf4llm),
whose ONNX Runtime sessions are made when pymupdf is imported (PyMuPDF 2.x imports its
layout package with it), with no way to pass them options: they run on a thread a core.
A prefork worker runs a child a core, and two children's layout threads then spin
against each other. Measured on four invoice pages, 4 passes on 2 cores: two processes
side by side spent 0.68 s of CPU and 0.69 s of wall time a page at the default, 0.38 s
of both at one thread (0.60 s of CPU alone at the default, 0.37 s at one thread): the
same cores read 1.8 times the pages, and a page's CPU seconds, which its cost is made
of, dropped by two fifths.

`cap_session_threads` makes every session created afterwards in this process that left
its thread counts at ONNX Runtime's default use the given count: the class
`onnxruntime.InferenceSession` is replaced by a subclass that fills them in. It must run
before pymupdf is imported (worker.celery_app.load_cpu_engines calls it first); sessions
made before keep their threads, which is logged. rapidocr sets its own
(worker.engines.rapidocr).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import onnxruntime

log = logging.getLogger(__name__)

_DEFAULT = 0  # SessionOptions' thread counts: 0 lets ONNX Runtime choose, a thread a core


def cap_session_threads(threads: int) -> None:
    """Sessions made from now on in this process run intra-op work on `threads` threads
    and inter-op work on one, unless their options say otherwise."""
    if "pymupdf" in sys.modules:
        log.warning(
            "pymupdf was imported before its layout models' threads were set: they run "
            "on ONNX Runtime's default, a thread a core"
        )
    base = getattr(onnxruntime.InferenceSession, "uncapped", onnxruntime.InferenceSession)

    class ThreadCappedSession(base):  # type: ignore[misc, valid-type]
        uncapped = base

        def __init__(
            self, path_or_bytes: Any, sess_options: Any = None, *args: Any, **kwargs: Any
        ) -> None:
            options = sess_options if sess_options is not None else onnxruntime.SessionOptions()
            if options.intra_op_num_threads == _DEFAULT:
                options.intra_op_num_threads = threads
            if options.inter_op_num_threads == _DEFAULT:
                options.inter_op_num_threads = 1
            super().__init__(path_or_bytes, options, *args, **kwargs)

    onnxruntime.InferenceSession = ThreadCappedSession  # type: ignore[misc]
