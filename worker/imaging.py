"""Facts about a page image that hold whatever engine runs next: is it blank, is it on its side.

Pure functions over PNG bytes: no Celery, database or S3. Blank detection is plain
image arithmetic; rotation detection runs rapidocr's bundled detector and recogniser
(models shipped inside the wheel, so nothing is downloaded at run time).

Rotation convention: `detect_rotation` returns the clockwise rotation, in degrees,
that turns the page upright, and `rotate_png(png, detect_rotation(png))` is the
corrected page. It adds to a PDF page's /Rotate the same way (also clockwise).
"""

from __future__ import annotations

import io
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np
from PIL import Image, UnidentifiedImageError

if TYPE_CHECKING:
    from rapidocr import RapidOCR

# --- blank pages -------------------------------------------------------------------------

# Outer band of the page, per side, that is not looked at. Scanner lids, skewed feeds and
# punched holes leave dark edges a few millimetres wide; 3% is 6 x 9 mm on A4, while
# running footers and page numbers sit 10 mm or more from the edge and are still counted.
BLANK_MARGIN_FRACTION = 0.03
# A pixel is ink when it differs from the paper by more than this many grey levels (of 255).
# After the 3x3 smoothing below, scanner noise of sigma 25 levels drops to about 9 and stays
# well under it, as does a gradient of 50 levels of uneven lighting across a page; pale grey
# text (about 200 on white paper) still counts.
INK_CONTRAST_LEVELS = 48
# An ink pixel must have at least this many ink pixels in its 3x3 neighbourhood (itself
# included). The smoothing widens every real stroke, even a one-pixel one, to a band three
# pixels wide whose pixels all pass; an isolated speck of salt-and-pepper noise, or two
# specks touching at a corner, light at most four and fail.
INK_MIN_NEIGHBOURS = 5
# Pages whose ink covers less than this share of the inspected area are blank. Measured on A4
# rendered at 72-300 dpi: a line of 11 pt text is 0.23-0.4%, a lone five-letter word
# 0.02-0.03% (not blank), a two-digit page number alone 0.007-0.01% (blank, at the edge).
# Scanner noise: Gaussian up to sigma 40 leaves nothing, salt-and-pepper on 2% of pixels
# 0.008%, and sigma 20 with 0.5% salt-and-pepper saved as JPEG quality 30 about 0.002%. Dust
# specks of a millimetre are real ink to this measure: some thirty of them make a page.
BLANK_MAX_INK_FRACTION = 1e-4

# --- rotation ----------------------------------------------------------------------------

# Pages are scaled down to at most this many pixels on the long side before detection: about
# 90 dpi for A4, where 9 pt text is still detected and read, and detection costs about a
# second of CPU instead of three to four at 150 dpi.
ROTATION_MAX_SIDE_PX = 1024
# Detected boxes at least this many times longer than high are text lines whose direction is
# known; squarer boxes (single glyphs, short numbers) could be either way up and are ignored.
ROTATION_MIN_LINE_ASPECT = 2.0
# The longest lines carry the most evidence; a dozen is enough and keeps recognition cheap.
ROTATION_SAMPLE_LINES = 12
# Lines longer than this many times their height are cut to their middle part (~25 glyphs).
ROTATION_MAX_LINE_ASPECT = 16.0
# The recogniser's mean confidence on upright lines is 0.95-1.0 on the corpus pages and on
# the same lines the wrong way up 0.5-0.75: a lead of 0.25 or more is settled after the
# first round of lines, and one under 0.1 is no evidence to rotate on.
ROTATION_LINES_PER_ROUND = 4
ROTATION_DECISIVE_LEAD = 0.25
ROTATION_MIN_CONFIDENCE_LEAD = 0.1

_CLOCKWISE: dict[int, int] = {
    90: cv2.ROTATE_90_CLOCKWISE,
    180: cv2.ROTATE_180,
    270: cv2.ROTATE_90_COUNTERCLOCKWISE,
}
_PIL_CLOCKWISE: dict[int, Image.Transpose] = {
    90: Image.Transpose.ROTATE_270,  # Pillow's names count counter-clockwise
    180: Image.Transpose.ROTATE_180,
    270: Image.Transpose.ROTATE_90,
}


def ink_fraction(png: bytes) -> float:
    """Share of the page, margins excluded, covered by ink, in [0, 1]."""
    gray = _decode_gray(png)
    height, width = gray.shape
    margin_y, margin_x = round(height * BLANK_MARGIN_FRACTION), round(width * BLANK_MARGIN_FRACTION)
    inner = gray[margin_y : height - margin_y, margin_x : width - margin_x]
    if inner.size == 0:
        return 0.0
    smooth = cv2.GaussianBlur(inner, (3, 3), 0)
    # The median is the paper: it is most of any page that could be blank, whatever its tone.
    # Distance from it in both directions also counts light text on a dark page.
    paper = _median_level(smooth)
    ink = (np.abs(smooth.astype(np.int16) - paper) > INK_CONTRAST_LEVELS).astype(np.uint8)
    neighbours = cv2.boxFilter(ink, ddepth=-1, ksize=(3, 3), normalize=False)
    kept = (ink == 1) & (neighbours >= INK_MIN_NEIGHBOURS)
    return float(np.count_nonzero(kept)) / float(kept.size)


def is_blank(png: bytes, max_ink_fraction: float = BLANK_MAX_INK_FRACTION) -> bool:
    """True when the page carries no ink worth reading: engines must not run on it."""
    return ink_fraction(png) < max_ink_fraction


def rotate_png(png: bytes, degrees: int) -> bytes:
    """The page turned clockwise by a multiple of 90 degrees, as PNG (resolution kept)."""
    turn = degrees % 360
    if turn not in (0, *_PIL_CLOCKWISE):
        raise ValueError(f"rotation must be a multiple of 90 degrees, not {degrees}")
    if turn == 0:
        return png
    with _open(png) as image:
        rotated = image.transpose(_PIL_CLOCKWISE[turn])
        dpi = image.info.get("dpi")
        out = io.BytesIO()
        if dpi is not None:
            rotated.save(out, format="PNG", dpi=dpi)
        else:
            rotated.save(out, format="PNG")
    return out.getvalue()


def detect_rotation(png: bytes) -> int:
    """Clockwise rotation in {0, 90, 180, 270} that makes the page upright.

    Text lines give the axis: the detector finds them whichever way the page lies, and
    lines that run up the page mean it is on its side. Which end is up comes from the
    recogniser, trained on upright text only: it reads the sampled lines turned each of the
    two remaining ways, and the turn it reads with clearly more confidence wins. A page with
    no line long enough to tell, or no clear winner, is left as it is (0).
    """
    image = _scaled_bgr(png, ROTATION_MAX_SIDE_PX)
    lines = _text_lines(image)
    if not lines:
        return 0
    vertical_px = sum(line.length_px for line in lines if line.vertical)
    horizontal_px = sum(line.length_px for line in lines if not line.vertical)
    vertical = vertical_px > horizontal_px
    sample = sorted(
        (line for line in lines if line.vertical == vertical),
        key=lambda line: line.length_px,
        reverse=True,
    )[:ROTATION_SAMPLE_LINES]
    candidates = (90, 270) if vertical else (0, 180)
    best, lead = _better_turn([line.crop for line in sample], candidates)
    return best if lead >= ROTATION_MIN_CONFIDENCE_LEAD else 0


def _better_turn(crops: list[np.ndarray], candidates: tuple[int, int]) -> tuple[int, float]:
    """The candidate turn the recogniser reads the lines best at, and its lead in mean
    confidence. Lines are read a few at a time and reading stops at a decisive lead."""
    totals = dict.fromkeys(candidates, 0.0)
    best, lead = candidates[0], 0.0
    for count, crop in enumerate(crops, start=1):
        for turn in candidates:
            totals[turn] += _confidence(crop, turn)
        round_done = count % ROTATION_LINES_PER_ROUND == 0 or count == len(crops)
        if not round_done:
            continue
        best, other = sorted(candidates, key=lambda turn: totals[turn], reverse=True)
        lead = (totals[best] - totals[other]) / count
        if lead >= ROTATION_DECISIVE_LEAD:
            break
    return best, lead


@dataclass(frozen=True)
class _TextLine:
    crop: np.ndarray  # the line cut out along its own skew, still lying as it does on the page
    vertical: bool
    length_px: float


def _text_lines(image: np.ndarray) -> list[_TextLine]:
    with _OCR_LOCK:
        result = _ocr()(image, use_det=True, use_cls=False, use_rec=False)
    boxes: Any = getattr(result, "boxes", None)
    if boxes is None:
        return []
    lines = []
    for quad in np.asarray(boxes, dtype=np.float32):
        line = _cut_line(image, quad)
        if line is not None:
            lines.append(line)
    return lines


def _cut_line(image: np.ndarray, quad: np.ndarray) -> _TextLine | None:
    """The text line inside a detected box, straightened but still lying as on the page.

    The box's own corner order is not used: on a skewed page turned on its side the
    detector may start it at any corner. Axes are taken from the page instead: `across`
    is the box side nearer the page's x axis, pointing right, `down` the other one.
    """
    edge_a, edge_b = quad[1] - quad[0], quad[2] - quad[1]
    length_a, length_b = float(np.linalg.norm(edge_a)), float(np.linalg.norm(edge_b))
    long_px, short_px = max(length_a, length_b), max(min(length_a, length_b), 1.0)
    if long_px / short_px < ROTATION_MIN_LINE_ASPECT:
        return None
    unit_a = edge_a / max(length_a, 1e-6)
    if abs(unit_a[0]) >= abs(unit_a[1]):
        across, across_px, down_px = unit_a, length_a, length_b
    else:
        across, across_px, down_px = np.array([unit_a[1], -unit_a[0]]), length_b, length_a
    across = across if across[0] > 0 else -across
    down = np.array([-across[1], across[0]])  # across turned 90 degrees clockwise on screen
    vertical = down_px > across_px
    # Recognition cost grows with line length and a few words tell up from down as well as
    # a whole line: keep the middle of long lines only.
    if vertical:
        down_px = min(down_px, across_px * ROTATION_MAX_LINE_ASPECT)
    else:
        across_px = min(across_px, down_px * ROTATION_MAX_LINE_ASPECT)
    centre = quad.mean(axis=0)
    half_across, half_down = across * across_px / 2, down * down_px / 2
    source = np.array(
        [
            centre - half_across - half_down,
            centre + half_across - half_down,
            centre + half_across + half_down,
            centre - half_across + half_down,
        ],
        dtype=np.float32,
    )
    width, height = max(round(across_px), 1), max(round(down_px), 1)
    target = np.array([[0, 0], [width, 0], [width, height], [0, height]], dtype=np.float32)
    matrix = cv2.getPerspectiveTransform(source, target)
    crop = cv2.warpPerspective(
        image, matrix, (width, height), flags=cv2.INTER_CUBIC, borderMode=cv2.BORDER_REPLICATE
    )
    return _TextLine(crop=crop, vertical=vertical, length_px=long_px)


def _confidence(crop: np.ndarray, turn: int) -> float:
    turned = crop if turn == 0 else cv2.rotate(crop, _CLOCKWISE[turn])
    with _OCR_LOCK:
        result = _ocr()(turned, use_det=False, use_cls=False, use_rec=True)
    scores: Any = getattr(result, "scores", None)
    # An empty reading is the recogniser finding nothing it knows: no confidence at all.
    return float(scores[0]) if scores else 0.0


# RapidOCR keeps each call's switches (use_det, use_rec, ...) on the instance, so two threads
# sharing it would run with each other's: calls go one at a time.
_OCR_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def _ocr() -> RapidOCR:
    from rapidocr import RapidOCR

    # "error": an empty detection on a page with no text is an answer here, not a warning.
    return RapidOCR(params={"Global.log_level": "error"})


# --- decoding ----------------------------------------------------------------------------


def _open(png: bytes) -> Image.Image:
    try:
        image = Image.open(io.BytesIO(png))
        image.load()
    except (UnidentifiedImageError, OSError) as error:
        raise ValueError(f"not a readable image: {error}") from error
    return image


def _flatten(image: Image.Image) -> Image.Image:
    """Grey or RGB on white: transparent areas of a PNG are paper, not black ink."""
    if image.mode.startswith("I"):
        # 16-bit greyscale scans: Pillow's own conversion clips every level above 255 to
        # white, which would erase all but the blackest ink. Scale the levels instead.
        levels = np.asarray(image, dtype=np.float64)
        full_scale = 65535.0 if levels.max(initial=0) > 255 else 255.0
        image = Image.fromarray(np.rint(levels * (255.0 / full_scale)).astype(np.uint8))
    if image.mode in ("L", "RGB") and "transparency" not in image.info:
        # Nothing transparent (every page pagemill renders): compositing would cost
        # more than the rest of the blank check together.
        return image
    rgba = image.convert("RGBA")
    paper = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    return Image.alpha_composite(paper, rgba).convert("RGB")


def _decode_gray(png: bytes) -> np.ndarray:
    with _open(png) as image:
        return np.asarray(_flatten(image).convert("L"), dtype=np.uint8)


def _scaled_bgr(png: bytes, max_side_px: int) -> np.ndarray:
    with _open(png) as image:
        rgb = _flatten(image).convert("RGB")
    scale = max_side_px / max(rgb.size)
    if scale < 1.0:
        size = (max(round(rgb.width * scale), 1), max(round(rgb.height * scale), 1))
        rgb = rgb.resize(size, Image.Resampling.LANCZOS)
    return np.ascontiguousarray(np.asarray(rgb, dtype=np.uint8)[:, :, ::-1])


def _median_level(gray: np.ndarray) -> int:
    # A histogram's running total finds the median of uint8 pixels without sorting millions.
    counts = np.bincount(gray.ravel(), minlength=256)
    return int(np.searchsorted(np.cumsum(counts), (gray.size + 1) // 2))
