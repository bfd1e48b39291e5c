"""CPU OCR with rapidocr 3.10.0 and its bundled default models.

rapidocr returns text lines with their boxes and word boxes; `ocr_layout` orders
them by region (columns, then lines), finds tables, and writes plain Markdown.
The layout pass of pymupdf4llm is not used here: on OCR words it read photos as
"picture text" (HTML comments and `<br>`) and interleaved scanned columns.
"""

from __future__ import annotations

import threading
import time
from functools import lru_cache
from typing import Any

import cv2
import numpy as np

from pagemill.settings import get_settings
from worker.engines.base import CPU_ENGINE_RENDER_DPI, EngineError, EngineResult, PageInput
from worker.engines.blocks_ocr import blocks_from_ocr_lines
from worker.engines.ocr_accents import doubt_accents
from worker.engines.ocr_boxes import Box, Line, Word, union
from worker.engines.ocr_layout import page_markdown


class RapidOcrEngine:
    name = "rapidocr"
    # rapidocr's detector is tuned for text lines 15-40 px high: 150 dpi puts
    # 9-12 pt body text there without the cost of 300 dpi pages.
    render_dpi = CPU_ENGINE_RENDER_DPI

    def convert(self, page: PageInput) -> EngineResult:
        started = time.process_time()
        lines, (height_px, width_px) = read_page(page.require_image())
        blocks = blocks_from_ocr_lines(
            lines, width_px, height_px, page.image_dpi, page.facts.number, self.name
        )
        return EngineResult(
            markdown=page_markdown(lines),
            # Process CPU time counts every thread ONNX Runtime runs (cpu_engine_threads).
            device_seconds=time.process_time() - started,
            device_kind="cpu",
            finish_reason="stop",
            details={"lines": len(lines)},
            blocks=blocks,
        )


def read_lines(png: bytes) -> list[Line]:
    """The page's text lines as rapidocr reads them, with their word boxes."""
    return read_page(png)[0]


def read_page(png: bytes) -> tuple[list[Line], tuple[int, int]]:
    """The page's text lines, and the size of the image read (height, width in pixels)."""
    image = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise EngineError("The page image could not be decoded.")
    size = (int(image.shape[0]), int(image.shape[1]))
    with _LOCK:
        # No line classifier: pages are turned upright before OCR (worker/orientation.py),
        # and the classifier turned clean upright lines over, reading them as noise
        # ("Eo l ( tn - a - t"): bag-of-words error 0.11-0.18 on clean one-column pages
        # with it, 0.00 without; 0.038 against 0.020 on the mean of 13 pages.
        result = _ocr()(image, return_word_box=True, use_cls=False)
    if result.boxes is None or result.txts is None:
        return [], size
    word_results = result.word_results or [()] * len(result.txts)
    scores = result.scores or [None] * len(result.txts)
    lines = [
        _line(text, quad, words, score)
        for text, quad, words, score in zip(
            result.txts, result.boxes, word_results, scores, strict=False
        )
        if str(text).strip()
    ]
    return lines, size


def _line(text: str, quad: Any, words: Any, score: float | None) -> Line:
    box = _box(quad)
    confidence = None if score is None else float(score)
    parsed = [
        Word(str(word_text), _box(word_quad), _score(word_score))
        for word_text, word_score, word_quad in (words or ())
        if str(word_text).strip()
    ]
    if [w.text for w in parsed] != text.split():
        if "".join(w.text for w in parsed) == "".join(text.split()):
            parsed = _rejoined(parsed, text, box.height)
            text = " ".join(w.text for w in parsed)
        else:
            # Word boxes that do not give back the line's text: the line stands as one word.
            parsed = [Word(text, box, confidence)]
    return Line(text=text, box=box, words=tuple(parsed), slope=_slope(quad), confidence=confidence)


# rapidocr also cuts a word where two of its characters stand far apart without reading
# a space between them: at a column gap ("0,00" and "21 %", two cells of a noisy invoice
# read as "0,0021.%", 1.0 line heights apart), or inside a word whose letters stand apart
# ("num" "mer:", 0.46). Gaps this wide are kept as a space, narrower ones joined back.
_UNREAD_SPACE_H = 0.75


def _rejoined(words: list[Word], text: str, height: float) -> list[Word]:
    """The recogniser's words, those it cut without a space joined back unless the cut
    leaves a gap wide enough for a column between them."""
    starts = _starts_of_tokens([w.text for w in words], text)
    joined: list[Word] = []
    for word, starts_token in zip(words, starts, strict=True):
        previous = joined[-1] if joined else None
        if (
            previous is None
            or starts_token
            or word.box.x0 - previous.box.x1 >= (_UNREAD_SPACE_H * height)
        ):
            joined.append(word)
            continue
        joined[-1] = Word(
            previous.text + word.text,
            union([previous.box, word.box]),
            _lowest(previous.confidence, word.confidence),
        )
    return joined


def _starts_of_tokens(pieces: list[str], text: str) -> list[bool]:
    """For each piece of the text (its characters in order, spaces left out), whether it
    begins one of the text's space-separated tokens."""
    boundaries, position = set(), 0
    for token in text.split():
        boundaries.add(position)
        position += len(token)
    starts, position = [], 0
    for piece in pieces:
        starts.append(position in boundaries)
        position += len(piece)
    return starts


def _lowest(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else min(a, b)


def _score(score: Any) -> float | None:
    try:
        return float(score)
    except (TypeError, ValueError):
        return None


def _slope(quad: Any) -> float:
    """Rise per pixel of the box's top edge (rapidocr gives corners clockwise from top left)."""
    points = np.asarray(quad, dtype=float).reshape(-1, 2)
    (x0, y0), (x1, y1) = points[0], points[1]
    return float((y1 - y0) / (x1 - x0)) if x1 - x0 > 1 else 0.0


def _box(quad: Any) -> Box:
    points = np.asarray(quad, dtype=float).reshape(-1, 2)
    return Box(
        float(points[:, 0].min()),
        float(points[:, 1].min()),
        float(points[:, 0].max()),
        float(points[:, 1].max()),
    )


# One engine a process; its per-call switches (word boxes) live on the shared instance.
_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def _ocr() -> Any:
    from rapidocr import RapidOCR

    threads = get_settings().cpu_engine_threads
    # Two 2-thread calls side by side on 2 cores (ONNX Runtime's default there) took
    # 8.7 s of CPU and 8.8 s of wall time for one invoice photo, 6.7 s of CPU alone;
    # one thread a call, 6.3 s of both, 6.2 s alone: the spinning threads cost CPU that
    # was charged to the page, and it moved with the neighbour's load.
    ocr = RapidOCR(
        params={
            "Global.log_level": "error",
            "EngineConfig.onnxruntime.intra_op_num_threads": threads,
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
        }
    )
    doubt_accents(ocr._load_rec_model())
    return ocr
