"""Imported once by the sandbox's fork server, so children start with it loaded.

Opening and rendering need none of PyMuPDF's layout models, whose import (with
onnxruntime) costs a second and 150 MB; a None entry makes that import fail fast,
which PyMuPDF treats as "layout not installed". Nothing here may open a document:
every child forked from this process must start clean.
"""

from __future__ import annotations

import sys

sys.modules["pymupdf.layout"] = None  # type: ignore[assignment]

import pymupdf  # noqa: E402, F401
from PIL import Image  # noqa: E402, F401

import pagemill.documents.inspect  # noqa: E402, F401
