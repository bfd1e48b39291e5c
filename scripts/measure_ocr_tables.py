"""Table agreement of three ways to find tables on scans, given the same OCR lines.

For every scanned variant `NAME.KIND.pdf` under VARIANTS_DIR (made by `pagemill
eval-variants`) whose invoice has a line-item table `NAME.table.md` under REFERENCES_DIR,
the first page is rendered at 150 dpi and read once by rapidocr (worker.engines.rapidocr,
word boxes included); then each candidate finds the page's tables in those lines:

- `current`: worker.engines.ocr_layout (tables from rows of aligned line boxes);
- `img2table`: img2table's borderless table detection on the image, with rapidocr's
  words supplied as its OCR (implicit rows and columns on);
- `layout`: the table regions rapid-layout's CDLA model finds (threshold --layout-conf),
  the lines inside each split into columns where their words leave gutters.

Each is scored as `pagemill eval` scores a page: rows, columns and cells of the output's
table closest to the reference. CPU seconds are process time for the table step alone.
img2table and rapid-layout are not dependencies of the service; install them apart:

    pip install --target /tmp/tables img2table rapid-layout opencv-contrib-python-headless \
        pypdfium2 xlsxwriter beautifulsoup4 --no-deps
    PYTHONPATH=/tmp/tables python scripts/measure_ocr_tables.py VARIANTS_DIR REFERENCES_DIR

(img2table needs OpenCV's contrib module, ximgproc, which the service's OpenCV lacks.)
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pymupdf

from cli.evaluation.scoring import best_table_agreement
from pagemill.quality.metrics import TableAgreement
from worker.engines.ocr_boxes import Line, rows_of
from worker.engines.ocr_layout import page_markdown
from worker.engines.ocr_table_cells import column_containing, nearest_column, table_columns
from worker.engines.rapidocr import read_lines


def current_tables(png: bytes, lines: list[Line]) -> str:
    return page_markdown(lines)


def img2table_tables(png: bytes, lines: list[Line]) -> str:
    from img2table.document import Image
    from img2table.ocr._types import OCRData, OCRInstance

    class SuppliedWords(OCRInstance):
        def of(self, document: Any) -> OCRData | None:
            records = [
                {
                    "id": f"w{index}_{number}",
                    "parent": f"l{index}",
                    "value": word.text,
                    "confidence": 99,
                    "x1": int(word.box.x0),
                    "y1": int(word.box.y0),
                    "x2": int(word.box.x1),
                    "y2": int(word.box.y1),
                }
                for index, line in enumerate(lines)
                for number, word in enumerate(line.words)
            ]
            return OCRData(records={0: records}) if records else None

    tables = Image(src=png).extract_tables(
        ocr=SuppliedWords(),
        implicit_rows=True,
        implicit_columns=True,
        borderless_tables=True,
        min_confidence=1,
    )
    return "\n\n".join(
        _markdown([[cell.value or "" for cell in row] for row in table.content.values()])
        for table in tables
    )


def layout_tables(png: bytes, lines: list[Line], confidence: float) -> str:
    from rapid_layout import RapidLayout

    image = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR)
    found = _layout_model(RapidLayout, confidence)(image)
    h = statistics.median(line.box.height for line in lines)
    tables = []
    for (x0, y0, x1, y1), label in zip(found.boxes, found.class_names, strict=True):
        inside = [line for line in lines if x0 <= line.box.cx <= x1 and y0 <= line.box.cy <= y1]
        if label != "table" or not inside:
            continue
        rows = [[block for block in row if isinstance(block, Line)] for row in rows_of(inside)]
        spans = [(w.box.x0, w.box.x1) for row in rows for line in row for w in line.words]
        columns = table_columns(spans, len(rows), h)
        cells = []
        for row in rows:
            texts: list[list[str]] = [[] for _ in columns]
            for line in row:
                for word in line.words:
                    column = column_containing(word.box, columns)
                    if column is None:
                        column = nearest_column(word.box, columns)
                    texts[column].append(word.text)
            cells.append([" ".join(text) for text in texts])
        tables.append(_markdown(cells))
    return "\n\n".join(tables)


_MODELS: dict[float, Any] = {}


def _layout_model(factory: Any, confidence: float) -> Any:
    if confidence not in _MODELS:
        _MODELS[confidence] = factory(conf_thresh=confidence)
    return _MODELS[confidence]


def _markdown(rows: list[list[str]]) -> str:
    if not rows:
        return ""
    width = max(len(row) for row in rows)
    cells = [[" ".join(c.split()).replace("|", "\\|") for c in row] for row in rows]
    cells = [row + [""] * (width - len(row)) for row in cells]
    lines = ["| " + " | ".join(row) + " |" for row in cells]
    lines.insert(1, "| " + " | ".join("---" for _ in range(width)) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", type=Path)
    parser.add_argument("references", type=Path)
    parser.add_argument("--candidates", default="current,img2table,layout")
    parser.add_argument("--layout-conf", type=float, default=0.5)
    args = parser.parse_args()
    candidates: dict[str, Callable[[bytes, list[Line]], str]] = {
        "current": current_tables,
        "img2table": img2table_tables,
        "layout": lambda png, lines: layout_tables(png, lines, args.layout_conf),
    }
    chosen = args.candidates.split(",")
    met: dict[str, int] = dict.fromkeys(chosen, 0)
    seconds: dict[str, list[float]] = {name: [] for name in chosen}
    count = 0
    for pdf in sorted(args.variants.glob("*.*.pdf")):
        name, kind = pdf.stem.split(".")[:2]
        reference = args.references / f"{name}.table.md"
        if not reference.is_file():
            continue
        with pymupdf.open(pdf) as document:
            pixmap = document[0].get_pixmap(dpi=150, colorspace=pymupdf.csGRAY, alpha=False)
            png = pixmap.tobytes("png")
        lines = read_lines(png)
        count += 1
        cells = []
        for candidate in chosen:
            started = time.process_time()
            markdown = candidates[candidate](png, lines)
            seconds[candidate].append(time.process_time() - started)
            agreement = best_table_agreement(markdown, reference.read_text())
            met[candidate] += _meets(agreement)
            cells.append(
                f"{candidate} {agreement.rows:.2f}/{agreement.columns:.2f}/{agreement.cells:.2f}"
            )
        print(f"{name:20s} {kind:6s} " + "  ".join(cells), flush=True)
    for candidate in chosen:
        print(
            f"{candidate}: rows >= 0.6 and cells >= 0.5 on {met[candidate]} of {count} pages, "
            f"{statistics.median(seconds[candidate]) * 1000:.1f} ms CPU a page (median)"
        )


def _meets(agreement: TableAgreement) -> bool:
    return agreement.rows >= 0.6 and agreement.cells >= 0.5


if __name__ == "__main__":
    main()
