"""Which way up a page lies, told cheaply enough to ask of every page before OCR.

Two questions, each answered by one of rapidocr's bundled models (nothing is downloaded):

1. The axis. The text detector finds line boxes whichever way a page lies; lines longer
   up the page than across it mean the page is on its side. It runs on the page scaled
   down to ~60 dpi, where it costs about a tenth of a second; a page where it finds too
   few lines to tell (small type on a large sheet, a blurred scan) is looked at again at
   twice that.
2. Which end is up. The longest lines are cut from the full-resolution page, trimmed to
   their own band of ink, laid horizontal and read by the text-direction classifier, a
   small model trained to tell upright lines from upside-down ones. When its mean vote is
   not clear (code listings, lines too few to vote), the recogniser, trained on upright
   text only, reads a few lines both ways: the turn read with more confidence wins. That
   costs some 0.3 s more, so it is kept for the pages that need it.

Rotation convention: `Orientation.rotation` is the clockwise turn, in degrees, that makes
the page upright; `rotate_png(png, rotation)` is the corrected page. It adds to a PDF page's
/Rotate the same way (also clockwise). Functions here are pure: no Celery, database or S3.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np

from worker.engines.base import PageFacts
from worker.imaging import INK_CONTRAST_LEVELS, decode_gray, median_level

if TYPE_CHECKING:
    from rapidocr.ch_ppocr_cls import TextClassifier
    from rapidocr.ch_ppocr_det import TextDetector
    from rapidocr.ch_ppocr_rec import TextRecognizer

TEXT_LAYER = "text layer"
# Long side, in pixels, the page is scaled to for finding lines: about 60 dpi on A4 or Letter,
# where 9 pt type is still found (its lines are some 8 px high) and the detector costs about
# 0.1 s of CPU. The second look is at twice that, where lines of 7 pt type on an A3 sheet or
# a blurred scan are found too, at four times the cost.
QUICK_SIDE_PX = 512
THOROUGH_SIDE_PX = 1024
# The detector looks only at rows and columns of the scaled page with ink on at least this
# share of their pixels, plus this margin: a row through even one short word is inked over
# more than that, while scanner noise, averaged away by the scaling, rarely reaches it.
INKED_LINE_SHARE = 0.01
INKED_MARGIN_PX = 16
# Boxes at least this many times longer than high are text lines whose direction is known;
# squarer boxes (single glyphs, short numbers) could be either way up and are ignored.
MIN_LINE_ASPECT = 2.0
# The quick look settles the axis when it finds at least this many lines and this share of
# their length runs one way; otherwise the page is looked at again at the thorough size.
MIN_LINES = 3
MIN_AXIS_SHARE = 0.8
# The longest lines carry the most evidence: this many are read.
SAMPLE_LINES = 8
# The classifier reads pieces of a line this many times longer than high (its input is
# 48 x 192 pixels), up to this many pieces a line, spread along it.
PIECE_ASPECT = 4.0
PIECES_PER_LINE = 2
# The classifier's vote is its mean of P(upright) - P(upside down) over the pieces. On the
# 936 corpus pages of scripts/measure_orientation.py (turned every way, clean and degraded)
# it was 0.70 or more on the right side for every clean page, and the few votes for the
# wrong side, all from blurred scans, stayed under 0.24. A page must reach this lead, on at
# least this many pieces, to be settled by the classifier alone; 5% of those pages did not
# and went to the recogniser.
CLASSIFIER_MIN_LEAD = 0.4
CLASSIFIER_MIN_PIECES = 4
# The recogniser's mean confidence on upright lines is 0.9-1.0 and on the same lines upside
# down 0.5-0.75: a lead of 0.25 is settled after a round of lines, one under 0.1 is no
# evidence to turn a page on. Its window is 48 x 320 pixels, so pieces are cut to fit it.
RECOGNISER_LINES_PER_ROUND = 4
RECOGNISER_DECISIVE_LEAD = 0.25
RECOGNISER_MIN_LEAD = 0.1
RECOGNISER_PIECE_ASPECT = 6.5
# A line's own band of ink: rows with at least this share of the fullest row's ink, grown by
# this share of the band's height on each side so ascenders and descenders stay in.
BAND_MIN_ROW_INK = 0.1
BAND_PAD = 0.15

_CLOCKWISE: dict[int, int] = {
    90: cv2.ROTATE_90_CLOCKWISE,
    180: cv2.ROTATE_180,
    270: cv2.ROTATE_90_COUNTERCLOCKWISE,
}


@dataclass(frozen=True)
class Orientation:
    """What was found about a page's orientation, and how."""

    rotation: int  # clockwise degrees that make the page upright: 0, 90, 180 or 270
    # "classifier", "recogniser", "text layer" (from the PDF's own text, no pixels looked
    # at: `from_text_layer`), or "none" when nothing could tell
    decided_by: str
    lines: int  # lines read: the longest on the page's text axis, at most SAMPLE_LINES
    lead: float  # the deciding model's margin for its answer (see the constants above)
    detector_side_px: int  # the long side the detector saw the page at
    cpu_seconds: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "rotation": self.rotation,
            "decided_by": self.decided_by,
            "lines": self.lines,
            "lead": round(self.lead, 3),
            "detector_side_px": self.detector_side_px,
            "cpu_seconds": round(self.cpu_seconds, 4),
        }

    def describe(self) -> str:
        if self.decided_by == "none":
            return "no text line clear enough to tell which way up the page is; read as it lies"
        how = (
            "the direction of the page's text layer"
            if self.decided_by == TEXT_LAYER
            else f"text {self.decided_by}, {self.lines} lines"
        )
        if self.rotation == 0:
            return f"upright ({how})"
        return f"turned {self.rotation} degrees clockwise before reading ({how})"


def from_text_layer(facts: PageFacts) -> Orientation | None:
    """The turn a PDF's visible text layer gives (`PageFacts.text_upright_turn`), for free.

    A born-digital page read by OCR (by request, or for its tables) draws its text where
    the layer says, so the layer's writing direction is the page's; a scan's is None.
    """
    if facts.text_upright_turn is None:
        return None
    return Orientation(
        rotation=facts.text_upright_turn,
        decided_by=TEXT_LAYER,
        lines=0,
        lead=1.0,
        detector_side_px=0,
        cpu_seconds=0.0,
    )


def detect_orientation(page: bytes | np.ndarray) -> Orientation:
    """How to turn a page (PNG bytes, or grey levels from `decode_gray`) upright.

    A page with no line long enough to tell, or no clear answer, is left as it is (0).
    """
    started = time.process_time()
    gray = decode_gray(page) if isinstance(page, bytes) else page
    side = QUICK_SIDE_PX
    lines = _text_lines(gray, side)
    if not _axis_is_clear(lines):
        side = THOROUGH_SIDE_PX
        lines = _text_lines(gray, side)
    vertical = _runs_up_the_page(lines)
    sample = sorted(
        (line for line in lines if line.vertical == vertical),
        key=lambda line: line.length_px,
        reverse=True,
    )[:SAMPLE_LINES]
    # Laid horizontal: upright text now means the page needs `base`, upside down base + 180.
    base = 90 if vertical else 0
    crops = [_ink_band(_cut_line(gray, line)) for line in sample]
    rotation, decided_by, lead = _which_end_up(crops, base)
    return Orientation(
        rotation=rotation,
        decided_by=decided_by,
        lines=len(sample),
        lead=lead,
        detector_side_px=side,
        cpu_seconds=time.process_time() - started,
    )


def _which_end_up(crops: list[np.ndarray], base: int) -> tuple[int, str, float]:
    if not crops:
        return 0, "none", 0.0
    pieces = [piece for crop in crops for piece in _pieces(crop, PIECE_ASPECT, PIECES_PER_LINE)]
    lead = _classifier_lead(pieces)
    if len(pieces) >= CLASSIFIER_MIN_PIECES and abs(lead) >= CLASSIFIER_MIN_LEAD:
        return (base if lead > 0 else base + 180) % 360, "classifier", abs(lead)
    lead = _recogniser_lead(crops)
    if abs(lead) < RECOGNISER_MIN_LEAD:
        return 0, "none", abs(lead)
    return (base if lead > 0 else base + 180) % 360, "recogniser", abs(lead)


# --- lines -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _TextLine:
    centre: np.ndarray  # in full-resolution page pixels
    across: np.ndarray  # unit vector of the box side nearer the page's x axis, pointing right
    down: np.ndarray  # `across` turned 90 degrees clockwise on screen
    across_px: float
    down_px: float

    @property
    def vertical(self) -> bool:
        return self.down_px > self.across_px

    @property
    def length_px(self) -> float:
        return max(self.across_px, self.down_px)

    @property
    def thickness_px(self) -> float:
        return max(min(self.across_px, self.down_px), 1.0)


def _text_lines(gray: np.ndarray, side_px: int) -> list[_TextLine]:
    height, width = gray.shape
    scale = min(1.0, side_px / max(height, width))
    small = gray
    if scale < 1.0:
        size = (max(round(width * scale), 1), max(round(height * scale), 1))
        small = cv2.resize(gray, size, interpolation=cv2.INTER_AREA)
    lines = []
    for quad in _detect_boxes(small):
        line = _line_from_box(quad / scale)
        if line.length_px / line.thickness_px >= MIN_LINE_ASPECT:
            lines.append(line)
    return lines


def _line_from_box(quad: np.ndarray) -> _TextLine:
    """The box's own corner order is not used: on a skewed page turned on its side the
    detector may start it at any corner. Axes are taken from the page instead."""
    edge_a, edge_b = quad[1] - quad[0], quad[2] - quad[1]
    length_a, length_b = float(np.linalg.norm(edge_a)), float(np.linalg.norm(edge_b))
    unit_a = edge_a / max(length_a, 1e-6)
    if abs(unit_a[0]) >= abs(unit_a[1]):
        across, across_px, down_px = unit_a, length_a, length_b
    else:
        across, across_px, down_px = np.array([unit_a[1], -unit_a[0]]), length_b, length_a
    across = across if across[0] > 0 else -across
    down = np.array([-across[1], across[0]])
    return _TextLine(quad.mean(axis=0), across, down, across_px, down_px)


def _axis_is_clear(lines: list[_TextLine]) -> bool:
    if len(lines) < MIN_LINES:
        return False
    vertical_px = sum(line.length_px for line in lines if line.vertical)
    total_px = sum(line.length_px for line in lines)
    share = max(vertical_px, total_px - vertical_px) / total_px
    return share >= MIN_AXIS_SHARE


def _runs_up_the_page(lines: list[_TextLine]) -> bool:
    vertical_px = sum(line.length_px for line in lines if line.vertical)
    horizontal_px = sum(line.length_px for line in lines if not line.vertical)
    return vertical_px > horizontal_px


def _cut_line(gray: np.ndarray, line: _TextLine) -> np.ndarray:
    """The line straightened along its own skew and laid horizontal. A line that runs up or
    down the page is given a quarter turn clockwise, as the whole page would be by a
    rotation of 90: upright text in the cut then means 90, upside-down text 270."""
    if line.vertical:
        half_across = line.across * line.thickness_px / 2
        half_down = line.down * line.length_px / 2
    else:
        half_across = line.across * line.length_px / 2
        half_down = line.down * line.thickness_px / 2
    centre = line.centre
    source = np.array(
        [
            centre - half_across - half_down,
            centre + half_across - half_down,
            centre + half_across + half_down,
            centre - half_across + half_down,
        ],
        dtype=np.float32,
    )
    width = max(round(2 * float(np.linalg.norm(half_across))), 1)
    height = max(round(2 * float(np.linalg.norm(half_down))), 1)
    target = np.array([[0, 0], [width, 0], [width, height], [0, height]], dtype=np.float32)
    matrix = cv2.getPerspectiveTransform(source, target)
    crop = cv2.warpPerspective(
        gray, matrix, (width, height), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
    )
    return cv2.rotate(crop, _CLOCKWISE[90]) if line.vertical else crop


def _ink_band(crop: np.ndarray) -> np.ndarray:
    """The rows of a horizontal line crop that hold the line itself.

    Detected boxes are drawn generously, and at the quick size they are coarse: a box often
    takes in the descenders of the line above and the ascenders of the line below, and cut
    glyph edges at the top and bottom of a piece look much like upside-down text to the
    classifier. The band with the most ink is the line; thin bands beside it are neighbours.
    The rule is the same both ways up, so it cannot favour either answer.
    """
    paper = median_level(crop)
    ink = np.abs(crop.astype(np.int16) - paper) > INK_CONTRAST_LEVELS
    rows = ink.mean(axis=1)
    if rows.max(initial=0.0) == 0.0:
        return crop
    inked = np.concatenate([rows >= BAND_MIN_ROW_INK * rows.max(), [False]])
    best, best_mass, start = (0, crop.shape[0]), -1.0, None
    for row, on in enumerate(inked):
        if on and start is None:
            start = row
        elif not on and start is not None:
            mass = float(rows[start:row].sum())
            if mass > best_mass:
                best, best_mass = (start, row), mass
            start = None
    top, bottom = best
    pad = max(1, round(BAND_PAD * (bottom - top)))
    return crop[max(0, top - pad) : min(crop.shape[0], bottom + pad)]


def _pieces(crop: np.ndarray, aspect: float, most: int) -> list[np.ndarray]:
    """Up to `most` windows `aspect` times wider than high, spread evenly along the line."""
    height, width = crop.shape
    window = max(round(height * aspect), 1)
    if width <= window:
        return [crop]
    count = min(most, width // window)
    if count == 1:
        start = (width - window) // 2
        return [crop[:, start : start + window]]
    starts = np.linspace(0, width - window, count).round().astype(int)
    return [crop[:, start : start + window] for start in starts]


# --- models --------------------------------------------------------------------------------


def _detect_boxes(gray: np.ndarray) -> list[np.ndarray]:
    """Text boxes (four corners each, in `gray`'s pixels) found by the detector.

    Only the inked part of the page is shown to it: margins are a third of a typical page
    and cost as much to look at as text. It is padded with paper to the multiple of 32 the
    network needs rather than stretched to it: at this size a stretch of a few per cent
    loses most lines of small type.
    """
    top, left, inked = _inked_area(gray)
    if inked.size == 0:
        return []
    height, width = inked.shape
    padded = np.full((-(-height // 32) * 32, -(-width // 32) * 32), median_level(gray), np.uint8)
    padded[:height, :width] = inked
    # The detector's own normalisation: (level / 255 - 0.5) / 0.5, three equal channels.
    channel = padded.astype(np.float32) / 127.5 - 1.0
    tensor = np.ascontiguousarray(np.broadcast_to(channel, (1, 3, *channel.shape)))
    detector = _models().detector
    boxes, _ = detector.postprocess_op(detector.session(tensor), padded.shape)
    offset = np.array([left, top], dtype=np.float32)
    return [np.asarray(box, dtype=np.float32) + offset for box in boxes]


def _inked_area(gray: np.ndarray) -> tuple[int, int, np.ndarray]:
    """The part of the page that holds ink, with a margin: (top, left, pixels)."""
    ink = np.abs(gray.astype(np.int16) - median_level(gray)) > INK_CONTRAST_LEVELS
    rows = np.flatnonzero(ink.sum(axis=1) >= INKED_LINE_SHARE * gray.shape[1])
    columns = np.flatnonzero(ink.sum(axis=0) >= INKED_LINE_SHARE * gray.shape[0])
    if rows.size == 0 or columns.size == 0:
        return 0, 0, gray[:0, :0]
    top, left = max(0, rows[0] - INKED_MARGIN_PX), max(0, columns[0] - INKED_MARGIN_PX)
    bottom = min(gray.shape[0], rows[-1] + 1 + INKED_MARGIN_PX)
    right = min(gray.shape[1], columns[-1] + 1 + INKED_MARGIN_PX)
    return top, left, gray[top:bottom, left:right]


def _classifier_lead(pieces: list[np.ndarray]) -> float:
    if not pieces:
        return 0.0
    classifier = _models().classifier
    batch = np.stack([classifier.resize_norm_img(_bgr(piece)) for piece in pieces])
    probabilities = np.asarray(classifier.session(batch.astype(np.float32)))
    # Labels are ("0", "180"): upright, upside down.
    return float(np.mean(probabilities[:, 0] - probabilities[:, 1]))


def _recogniser_lead(crops: list[np.ndarray]) -> float:
    """Mean confidence reading the lines as they lie minus reading them upside down, over
    rounds of lines until the lead is decisive."""
    from rapidocr.ch_ppocr_rec import TextRecInput

    recogniser = _models().recogniser
    windows = [_bgr(_pieces(crop, RECOGNISER_PIECE_ASPECT, 1)[0]) for crop in crops]
    lead_total, lead = 0.0, 0.0
    for first in range(0, len(windows), RECOGNISER_LINES_PER_ROUND):
        batch = windows[first : first + RECOGNISER_LINES_PER_ROUND]
        turned = [cv2.rotate(window, _CLOCKWISE[180]) for window in batch]
        result = recogniser(TextRecInput(img=batch + turned))
        # An empty reading is the recogniser finding nothing it knows: no confidence at all.
        scores = [float(score) if score else 0.0 for score in result.scores]
        lead_total += sum(scores[: len(batch)]) - sum(scores[len(batch) :])
        lead = lead_total / (first + len(batch))
        if abs(lead) >= RECOGNISER_DECISIVE_LEAD:
            break
    return lead


def _bgr(gray: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(gray, cv2.COLOR_GRAY2BGR)


@dataclass(frozen=True)
class _Models:
    detector: TextDetector
    classifier: TextClassifier
    recogniser: TextRecognizer


_MODELS_LOCK = threading.Lock()


def _models() -> _Models:
    # Sessions are made once per process; ONNX Runtime runs one session from many threads
    # at once, and the pre- and post-processing used here keep no state between calls, so
    # the GPU worker's page threads detect side by side without a lock.
    with _MODELS_LOCK:
        return _load_models()


@lru_cache(maxsize=1)
def _load_models() -> _Models:
    from rapidocr import RapidOCR

    ocr = RapidOCR(
        params={
            "Global.log_level": "error",
            # One thread a call: detection is small work, and ONNX Runtime's spinning
            # worker threads would double its CPU time for a few tens of milliseconds.
            "EngineConfig.onnxruntime.intra_op_num_threads": 1,
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
        }
    )
    # rapidocr 3.10.0 builds each model on first use; these load them without running the
    # whole pipeline, whose per-call switches live on the shared instance.
    return _Models(ocr._load_det_model(), ocr._load_cls_model(), ocr._load_rec_model())
