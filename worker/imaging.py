"""Facts about a page image that hold whatever engine runs next: is it blank; and the
page turned by quarter turns. Which way up a page lies is `worker.orientation`.

Pure functions over PNG bytes, or over the grey levels `decode_gray` makes of them (so a
page decoded once serves every check): no Celery, database or S3.
"""

from __future__ import annotations

import io

import cv2
import numpy as np
from PIL import Image, UnidentifiedImageError

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


def ink_fraction(page: bytes | np.ndarray) -> float:
    """Share of the page, margins excluded, covered by ink, in [0, 1]."""
    gray = decode_gray(page) if isinstance(page, bytes) else page
    height, width = gray.shape
    margin_y, margin_x = round(height * BLANK_MARGIN_FRACTION), round(width * BLANK_MARGIN_FRACTION)
    inner = gray[margin_y : height - margin_y, margin_x : width - margin_x]
    if inner.size == 0:
        return 0.0
    smooth = cv2.GaussianBlur(inner, (3, 3), 0)
    # The median is the paper: it is most of any page that could be blank, whatever its tone.
    # Distance from it in both directions also counts light text on a dark page.
    paper = median_level(smooth)
    ink = (np.abs(smooth.astype(np.int16) - paper) > INK_CONTRAST_LEVELS).astype(np.uint8)
    neighbours = cv2.boxFilter(ink, ddepth=-1, ksize=(3, 3), normalize=False)
    kept = (ink == 1) & (neighbours >= INK_MIN_NEIGHBOURS)
    return float(np.count_nonzero(kept)) / float(kept.size)


def is_blank(page: bytes | np.ndarray, max_ink_fraction: float = BLANK_MAX_INK_FRACTION) -> bool:
    """True when the page (PNG bytes or `decode_gray` levels) carries no ink worth reading:
    engines must not run on it."""
    return ink_fraction(page) < max_ink_fraction


# --- quarter turns -----------------------------------------------------------------------

_PIL_CLOCKWISE: dict[int, Image.Transpose] = {
    90: Image.Transpose.ROTATE_270,  # Pillow's names count counter-clockwise
    180: Image.Transpose.ROTATE_180,
    270: Image.Transpose.ROTATE_90,
}


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


def decode_gray(png: bytes) -> np.ndarray:
    """The page's grey levels, 0-255, transparent areas as white paper."""
    with _open(png) as image:
        return np.asarray(_flatten(image).convert("L"), dtype=np.uint8)


def median_level(gray: np.ndarray) -> int:
    # A histogram's running total finds the median of uint8 pixels without sorting millions.
    # Every fourth pixel each way: the paper is most of the page, and a sixteenth of a
    # page's pixels finds its level as well as all of them, at a sixteenth of the cost.
    sample = gray[::4, ::4] if gray.size >= 1 << 16 else gray
    counts = np.bincount(sample.ravel(), minlength=256)
    return int(np.searchsorted(np.cumsum(counts), (sample.size + 1) // 2))
