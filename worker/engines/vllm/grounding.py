"""The blocks layer from a VLM's grounding boxes, for profiles that emit them.

DeepSeek-OCR in grounding mode writes each block as
`<|ref|>kind<|/ref|><|det|>[[x0, y0, x1, y1], ...]<|/det|>` followed by its content,
boxes on a 0-999 grid over the page image whatever its size. A block's box is known,
its lines' and words' are not: each line of a block is given the block's box (the
line lies within it) and no words. Profiles that emit no grounding give no blocks.
"""

from __future__ import annotations

import json
import re
import struct

from pagemill.documents.blocks import Block, BlockKind, Box, Line, PageBlocks
from worker.engines.vllm.postprocess import DEEPSEEK_END, GROUNDING_TAG

# The grid DeepSeek-OCR's boxes are written on: 0..999 across and down the image.
GRID = 999
# DeepSeek-OCR's block labels, by what the blocks layer calls them; any other label
# (text, list, caption, equation, ...) is text.
_KINDS = {
    "title": BlockKind.HEADING,
    "sub_title": BlockKind.HEADING,
    "table": BlockKind.TABLE,
    "header": BlockKind.FURNITURE,
    "footer": BlockKind.FURNITURE,
    "page_header": BlockKind.FURNITURE,
    "page_footer": BlockKind.FURNITURE,
    "page_number": BlockKind.FURNITURE,
}
_TAG = re.compile(r"<[^>]+>")
_MARKDOWN_MARKS = re.compile(r"^\s*(#{1,6}\s+|[-*+]\s+|>\s*)")


def blocks_from_grounding(
    raw: str, page_number: int, width_pt: float, height_pt: float, engine: str
) -> PageBlocks | None:
    """The blocks of a grounded answer; None when the answer holds no grounding."""
    tags = list(GROUNDING_TAG.finditer(raw))
    if not tags:
        return None
    blocks: list[Block] = []
    for index, tag in enumerate(tags):
        end = tags[index + 1].start() if index + 1 < len(tags) else len(raw)
        box = _box(tag.group(2), width_pt, height_pt)
        texts = _texts(raw[tag.end() : end].replace(DEEPSEEK_END, ""))
        if box is None or not texts:
            continue  # a picture, or boxes the model wrote unreadably
        blocks.append(
            Block(
                kind=_KINDS.get(tag.group(1).strip(), BlockKind.TEXT),
                box=box,
                lines=[Line(text=text, box=box) for text in texts],
            )
        )
    return PageBlocks(
        page=page_number, width_pt=width_pt, height_pt=height_pt, engine=engine, blocks=blocks
    )


def _texts(content: str) -> list[str]:
    """The block's lines as plain text: Markdown marks and HTML (tables) taken off, a
    table's rows one line each."""
    content = re.sub(r"</tr>|<br\s*/?>", "\n", content)
    content = re.sub(r"</t[dh]>", " ", content)
    lines = (_MARKDOWN_MARKS.sub("", _TAG.sub("", line)) for line in content.splitlines())
    return [" ".join(line.split()) for line in lines if line.strip()]


def _box(det: str, width_pt: float, height_pt: float) -> Box | None:
    """The union of the tag's boxes in points; None when they do not parse."""
    try:
        boxes = json.loads(det)
        corners = [(float(b[0]), float(b[1]), float(b[2]), float(b[3])) for b in boxes]
    except (ValueError, TypeError, IndexError):
        return None
    if not corners:
        return None
    x0, y0 = min(c[0] for c in corners), min(c[1] for c in corners)
    x1, y1 = max(c[2] for c in corners), max(c[3] for c in corners)
    return (
        round(x0 / GRID * width_pt, 2),
        round(y0 / GRID * height_pt, 2),
        round(x1 / GRID * width_pt, 2),
        round(y1 / GRID * height_pt, 2),
    )


def png_size(png: bytes) -> tuple[int, int] | None:
    """Width and height in pixels from a PNG's header; None for anything else."""
    if len(png) < 24 or png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", png[16:24])
    return int(width), int(height)
