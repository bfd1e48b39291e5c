"""Page images made to look scanned: each kind is one degradation, seeded.

Each kind changes one thing, so a drop in quality on a kind points at its cause. The
strengths are those of an ordinary office scan at 150 dpi, not torture tests: the aim is
to catch regressions on documents people really send, with text still legible to a
person.
"""

from __future__ import annotations

import io
from collections.abc import Callable

import cv2
import numpy as np
from PIL import Image, ImageFilter

# Standard deviation of the sensor noise, in grey levels, and the share of pixels flipped
# to pure black or white (dust, dropouts).
NOISE_SIGMA = 12.0
SPECKLE_SHARE = 0.004
# Gaussian blur radius in pixels at 150 dpi: a slightly defocused scanner.
BLUR_RADIUS_PX = 1.0
# A sheet fed a little crooked: the angle is drawn from this range, either way.
SKEW_DEGREES = (0.7, 2.0)
# Quality of a strongly compressed JPEG, as a phone or a mail gateway makes.
JPEG_QUALITY = 25
WHITE = 255
# A phone photo of a sheet on a table: each corner moved by up to this share of the
# side (perspective), light falling off to this share across the page, sensor noise
# and a phone's JPEG quality.
PHOTO_CORNER_SHIFT = 0.04
PHOTO_LIGHT_FALLOFF = 0.55
PHOTO_NOISE_SIGMA = 4.0
PHOTO_JPEG_QUALITY = 45
PHOTO_TABLE_GREY = 200

Degrade = Callable[[Image.Image, np.random.Generator], Image.Image]


def _clean(image: Image.Image, _rng: np.random.Generator) -> Image.Image:
    return image


def _noise(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    pixels = np.asarray(image, dtype=np.float32) + rng.normal(0.0, NOISE_SIGMA, image.size[::-1])
    speckled = rng.random(pixels.shape) < SPECKLE_SHARE
    pixels[speckled] = rng.choice(np.array([0.0, 255.0], dtype=np.float32), int(speckled.sum()))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), mode="L")


def _blur(image: Image.Image, _rng: np.random.Generator) -> Image.Image:
    return image.filter(ImageFilter.GaussianBlur(BLUR_RADIUS_PX))


def _skew(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    low, high = SKEW_DEGREES
    angle = float(rng.uniform(low, high)) * (1 if rng.random() < 0.5 else -1)
    # Expanded so no ink near the margin is cut off.
    return image.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=WHITE)


def _jpeg(image: Image.Image, _rng: np.random.Generator) -> Image.Image:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=JPEG_QUALITY)
    buffer.seek(0)
    with Image.open(buffer) as compressed:
        return compressed.convert("L")


def photograph(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    """The page photographed: margin of table around it, perspective, uneven light, JPEG."""
    pixels = np.asarray(image.convert("L"), dtype=np.float32)
    height, width = pixels.shape
    pad = int(0.06 * max(height, width))
    canvas = np.full((height + 2 * pad, width + 2 * pad), float(WHITE), np.float32)
    canvas[pad : pad + height, pad : pad + width] = pixels
    rows, cols = canvas.shape
    corners = np.array([[0, 0], [cols, 0], [cols, rows], [0, rows]], dtype=np.float32)
    shifted = corners + rng.uniform(-PHOTO_CORNER_SHIFT, PHOTO_CORNER_SHIFT, (4, 2)) * [cols, rows]
    warp = cv2.getPerspectiveTransform(corners, shifted.astype(np.float32))
    warped = cv2.warpPerspective(
        canvas, warp, (cols, rows), flags=cv2.INTER_LINEAR, borderValue=PHOTO_TABLE_GREY
    )
    light = np.linspace(1.0, PHOTO_LIGHT_FALLOFF, cols)[None, :]
    if rng.random() < 0.5:
        light = light[:, ::-1]
    lit = warped * light + rng.normal(0.0, PHOTO_NOISE_SIGMA, warped.shape)
    buffer = io.BytesIO()
    Image.fromarray(np.clip(lit, 0, 255).astype(np.uint8), mode="L").save(
        buffer, format="JPEG", quality=PHOTO_JPEG_QUALITY
    )
    buffer.seek(0)
    with Image.open(buffer) as compressed:
        return compressed.convert("L")


def _turned(clockwise_degrees: int) -> Degrade:
    # Pillow turns counter-clockwise; a sheet fed sideways is described clockwise.
    def turn(image: Image.Image, _rng: np.random.Generator) -> Image.Image:
        return image.rotate(-clockwise_degrees, expand=True)

    return turn


DEGRADATIONS: dict[str, Degrade] = {
    "clean": _clean,  # rendered only: what OCR loses before any degradation
    "noise": _noise,
    "blur": _blur,
    "skew": _skew,
    "jpeg": _jpeg,
    "rotate-90": _turned(90),
    "rotate-180": _turned(180),
    "rotate-270": _turned(270),
    "photo": photograph,
    # Pages laid out anew from the source's text (`layouts.RELAYOUTS`), then imaged: a
    # two-column page through a scanner, a till receipt photographed.
    "two-column": _noise,
    "receipt": photograph,
}
VARIANT_KINDS = tuple(DEGRADATIONS)


def degrade(image: Image.Image, kind: str, rng: np.random.Generator) -> Image.Image:
    """`image` (greyscale) degraded as `kind`; the same generator state gives the same pixels."""
    return DEGRADATIONS[kind](image.convert("L"), rng)
