"""What device seconds a page is charged for when it took more than one reading."""

from __future__ import annotations


def attempts_seconds(charged_before: float, this_attempt: float) -> float:
    """Attempts stopped at the time limit were charged when they stopped; the page's
    device seconds are what all its attempts took."""
    return charged_before + this_attempt


def repaired_seconds(first_reading: float, second_reading: float) -> float:
    """A page read twice (a failed check repaired by another engine) pays for both
    readings, whichever answer is kept."""
    return first_reading + second_reading


def orientation_seconds(detection_cpu_seconds: float, device_kind: str) -> float:
    """The seconds orientation detection adds to a page read by OCR.

    Detection runs on the worker's CPU: a CPU engine's page is charged for it, while a
    GPU page's device seconds are GPU time, which detection did not use."""
    return detection_cpu_seconds if device_kind == "cpu" else 0.0
