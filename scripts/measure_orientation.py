"""Accuracy and CPU time of page orientation detection on corpus pages turned every way.

Every page of every PDF in CORPUS_DIR is rendered at 150 dpi (the OCR engine's
resolution; /Rotate applied as a viewer shows it) and every PNG or WebP is taken as it
is; blank pages are left out. Each page is then degraded as scans are (a skew of 1-3
degrees, sensor noise with salt and pepper, blur, JPEG quality 25, and all of skew, noise
and JPEG together), each variant is turned 0, 90, 180 and 270 degrees clockwise, and
the detector must answer the opposite turn. A page whose upright form is not the one
its file shows is named in UPRIGHT_TURNS with the turn that makes it upright.

Run: python scripts/measure_orientation.py CORPUS_DIR [--kinds clean,skew] [--out rows.jsonl]
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pymupdf
from PIL import Image, ImageFilter

from worker.imaging import is_blank, rotate_png
from worker.orientation import detect_orientation

RENDER_DPI = 150
KINDS = ("clean", "skew", "jpeg", "noise", "blur", "scan")
TURNS = (0, 90, 180, 270)
# docling's sideways scan: shown turned a quarter anticlockwise (its page has /Rotate 270).
UPRIGHT_TURNS = {"ocr_test_rotated_90.pdf": 90}


def corpus_pages(corpus: Path) -> Iterator[tuple[str, bytes]]:
    for pdf in sorted(corpus.rglob("*.pdf")):
        with pymupdf.open(pdf) as document:
            for index, page in enumerate(document):
                png = page.get_pixmap(dpi=RENDER_DPI, alpha=False).tobytes("png")
                yield f"{pdf.name}#{index + 1}", rotate_png(png, UPRIGHT_TURNS.get(pdf.name, 0))
    for path in sorted([*corpus.rglob("*.png"), *corpus.rglob("*.webp")]):
        with Image.open(path) as image:
            yield path.name, _png(np.asarray(image.convert("RGB")))


def degrade(png: bytes, kind: str, rng: np.random.Generator) -> bytes:
    if kind == "clean":
        return png
    gray = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
    if kind == "skew":
        angle = float(rng.uniform(1.0, 3.0) * rng.choice([-1, 1]))
        skewed = Image.fromarray(gray).rotate(
            angle, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=255
        )
        return _png(np.asarray(skewed))
    if kind == "jpeg":
        out = io.BytesIO()
        Image.fromarray(gray).save(out, format="JPEG", quality=25)
        return _png(np.asarray(Image.open(io.BytesIO(out.getvalue()))))
    if kind == "noise":
        noisy = gray.astype(np.float32) + rng.normal(0.0, 25.0, gray.shape)
        specks = rng.random(gray.shape)
        noisy[specks < 0.003] = 0.0
        noisy[specks > 0.997] = 255.0
        return _png(np.clip(noisy, 0, 255).astype(np.uint8))
    if kind == "blur":
        return _png(np.asarray(Image.fromarray(gray).filter(ImageFilter.GaussianBlur(1.6))))
    if kind == "scan":
        return degrade(degrade(degrade(png, "skew", rng), "noise", rng), "jpeg", rng)
    raise ValueError(f"unknown degradation {kind!r}")


def _without(record: dict[str, object], key: str) -> dict[str, object]:
    return {name: value for name, value in record.items() if name != key}


def _png(pixels: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG", compress_level=1)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--out", type=Path, help="one JSON line per case")
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    rng = np.random.default_rng(7)
    rows = []
    out = args.out.open("w") if args.out else None
    pages = [(name, png) for name, png in corpus_pages(args.corpus) if not is_blank(png)]
    detect_orientation(pages[0][1])  # load the models outside the measurement
    for name, png in pages:
        for kind in kinds:
            variant = degrade(png, kind, rng)
            for turn in TURNS:
                turned = rotate_png(variant, turn)
                started = time.process_time()
                found = detect_orientation(turned)
                cpu_seconds = time.process_time() - started
                row = {
                    "page": name,
                    "kind": kind,
                    "turn": turn,
                    "want": (360 - turn) % 360,
                    "cpu_seconds": cpu_seconds,
                    **_without(found.as_dict(), "cpu_seconds"),
                }
                rows.append(row)
                if out:
                    out.write(json.dumps(row) + "\n")
                    out.flush()
    report(rows, len(pages))


def report(rows: list[dict[str, object]], page_count: int) -> None:
    right = [row for row in rows if row["rotation"] == row["want"]]
    cpu_ms = sorted(1000 * float(row["cpu_seconds"]) for row in rows)  # type: ignore[arg-type]
    print(f"{len(right)}/{len(rows)} correct ({page_count} pages)")
    print(
        f"CPU ms a page: mean {statistics.mean(cpu_ms):.0f}, "
        f"median {statistics.median(cpu_ms):.0f}, "
        f"p95 {cpu_ms[int(0.95 * (len(cpu_ms) - 1))]:.0f}, max {cpu_ms[-1]:.0f}"
    )
    for field in ("kind", "turn"):
        tally: dict[object, list[int]] = defaultdict(lambda: [0, 0])
        for row in rows:
            tally[row[field]][0] += row["rotation"] == row["want"]
            tally[row[field]][1] += 1
        print(f"by {field}: " + ", ".join(f"{key} {ok}/{n}" for key, (ok, n) in tally.items()))
    print("decided by:", dict(Counter(str(row["decided_by"]) for row in rows)))
    print("detector side:", dict(Counter(str(row["detector_side_px"]) for row in rows)))
    for row in rows:
        if row["rotation"] != row["want"]:
            print(
                f"  wrong: {row['page']} {row['kind']} turned {row['turn']}: "
                f"answered {row['rotation']} ({row['decided_by']}, {row['lines']} lines, "
                f"lead {row['lead']})"
            )


if __name__ == "__main__":
    main()
