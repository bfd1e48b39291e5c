"""Shared pieces: run settings, medians, generated inputs, machine facts."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Plan:
    """How big each benchmark is. `smoke` is tiny: it only proves each one runs."""

    smoke: bool
    runs: int
    workdir: Path

    def size(self, smoke: int, full: int) -> int:
        return smoke if self.smoke else full


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def summary(values: Sequence[float]) -> dict[str, Any]:
    """The median and every run, so the report can show the spread."""
    return {"median": median(values), "runs": [float(v) for v in values]}


def cpu_seconds_each(items: Iterable[Any], work: Callable[[Any], object]) -> float:
    """The process time `work` takes an item, over all of them: every thread of the
    process counted (onnxruntime's included), so it reads the same on a busy machine."""
    items = list(items)
    started = time.process_time()
    for item in items:
        work(item)
    return (time.process_time() - started) / len(items)


class PairedRuns(NamedTuple):
    firsts: list[float]
    seconds: list[float]
    ratios: list[float]  # first / second, run by run


def alternating_runs(
    runs: int,
    first: Callable[[], float],
    second: Callable[[], float],
    log_run: Callable[[int, float, float], None],
) -> PairedRuns:
    """Each measurement once a run, the one then the other, the order swapped every
    other run so that drift in machine load falls on both sides; `log_run` hears each
    run's number (from 1) and its two values."""
    firsts: list[float] = []
    seconds: list[float] = []
    for index in range(runs):
        if index % 2:
            seconds.append(second())
            firsts.append(first())
        else:
            firsts.append(first())
            seconds.append(second())
        log_run(index + 1, firsts[-1], seconds[-1])
    return PairedRuns(firsts, seconds, [a / b for a, b in zip(firsts, seconds, strict=True)])


def verdict(value: float, target: float, higher_is_better: bool = True) -> dict[str, Any]:
    """Met or missed, and by how much (as a share of the target)."""
    met = value >= target if higher_is_better else value <= target
    margin = (value - target) / target if target else float("nan")
    return {
        "target": target,
        "higher_is_better": higher_is_better,
        "met": bool(met),
        "margin": margin,
    }


def make_text_pdf(path: Path, pages: int, *, lines: int = 40) -> Path:
    """A born-digital A4 document: a heading, body lines and a small ruled table a page.

    Each page's drawing is one content stream, as PDF writers make it (every page of the
    development corpus has one): PyMuPDF adds a stream for each insertion, and 49 of them
    a page made the file eleven times larger and reading it slower than such a document."""
    import pymupdf

    document = pymupdf.open()
    for number in range(1, pages + 1):
        page = document.new_page(width=595, height=842)
        page.insert_text((72, 72), f"Invoice 2041-{number:04d}", fontsize=16)
        y = 100.0
        for line in range(lines):
            text = (
                f"Line {line + 1}: item {number * 7 + line} delivered to Harbour Supplies Ltd, "
                f"quantity {line % 9 + 1}, unit price {(line * 13) % 97 + 0.5:.2f} EUR"
            )
            page.insert_text((72, y), text, fontsize=9)
            y += 13
        for row in range(4):
            top = y + 10 + row * 18
            page.draw_rect(pymupdf.Rect(72, top, 523, top + 18), width=0.5)
            page.insert_text((78, top + 12), f"Total row {row + 1}: {row * 111.11:.2f}", fontsize=9)
        page.clean_contents()
    # garbage=3: the streams merged away are left out of the file.
    document.save(str(path), deflate=True, garbage=3)
    document.close()
    return path


def machine() -> dict[str, Any]:
    facts: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                facts["cpu_model"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                facts["memory_gb"] = round(int(line.split()[1]) / 1024**2, 1)
                break
        facts["load_average_at_start"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    return facts


def tool_version(command: list[str]) -> str | None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (done.stdout or done.stderr).strip().splitlines()
    return text[0] if text else None
