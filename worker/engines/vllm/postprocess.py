"""From a model's raw output to the page's Markdown."""

from __future__ import annotations

import json
import re
from typing import Any

from worker.engines.vllm.profiles import OutputFormat

# DeepSeek-OCR in grounding mode tags each block with its kind and boxes:
# <|ref|>text<|/ref|><|det|>[[x1, y1, x2, y2]]<|/det|> followed by the
# content. The tag names the block type, not its text, so it leaves the
# Markdown; kind and boxes are kept beside it, in reading order.
GROUNDING_TAG = re.compile(r"<\|ref\|>(.*?)<\|/ref\|><\|det\|>(.*?)<\|/det\|>\n?", re.DOTALL)
# DeepSeek's end-of-sentence token, written with full-width bars and U+2581.
DEEPSEEK_END = "<\uff5cend\u2581of\u2581sentence\uff5c>"
# olmOCR-2 answers with YAML front matter (language, rotation, table/diagram
# flags) above the page text.
_FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n?", re.DOTALL)


def to_markdown(raw: str, output_format: OutputFormat) -> tuple[str, dict[str, Any]]:
    """The Markdown, and any metadata the model put around it."""
    if output_format == "deepseek_grounding":
        return _from_grounding(raw)
    if output_format == "yaml_front_matter":
        match = _FRONT_MATTER.match(raw.lstrip())
        if match is None:
            return raw.strip(), {}
        meta = {}
        for line in match.group(1).splitlines():
            key, sep, value = line.partition(":")
            if sep:
                meta[key.strip()] = value.strip()
        return raw.lstrip()[match.end() :].strip(), meta
    return raw.strip(), {}


def _from_grounding(raw: str) -> tuple[str, dict[str, Any]]:
    blocks: list[dict[str, Any]] = []

    def keep(match: re.Match[str]) -> str:
        blocks.append({"kind": match.group(1).strip(), "boxes": _boxes(match.group(2))})
        return ""

    text = GROUNDING_TAG.sub(keep, raw).replace(DEEPSEEK_END, "")
    return text.strip(), ({"grounding": blocks} if blocks else {})


def _boxes(det: str) -> Any:
    """[[x1, y1, x2, y2], ...] on DeepSeek-OCR's 0-999 grid over the page image.

    Kept as written when it does not parse: a model can emit anything.
    """
    try:
        return json.loads(det)
    except ValueError:
        return det.strip()
