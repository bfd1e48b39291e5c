"""The page checks' scans find what a plain scan finds.

They run on every page a worker reads, so they skip ahead rather than step through the
page: the LaTeX scan jumps between the characters that can open or close a formula, the
loop search passes over periods with too few matching tokens to hold a loop, and a table
row without escapes or code is split at its pipes at once. Each is held here to a scan
that steps through everything, on thousands of generated pages dense in what the
shortcut skips: markers next to each other, escapes, blank lines, currency, loops of
every length around the thresholds, units of markup alone, and pipes inside code.
"""

from __future__ import annotations

import random

import numpy as np

from pagemill.quality import checks
from pagemill.quality.checks import (
    LOOP_MAX_PERIOD_TOKENS,
    LOOP_MIN_REPEATS,
    _find_in_paragraph,
    _inline_dollar,
    _Loop,
    _true_runs,
    split_row,
)


def stepping_scan_math(text: str) -> tuple[int, list[str]]:
    """The LaTeX scan one character at a time."""
    pairs = 0
    errors: list[str] = []
    index = 0
    while index < len(text):
        if text.startswith("$$", index):
            close = text.find("$$", index + 2)
            opener = "$$"
        elif text.startswith("\\[", index):
            close = text.find("\\]", index + 2)
            opener = "\\["
        elif text.startswith("\\(", index):
            close = _find_in_paragraph(text, "\\)", index + 2)
            opener = "\\("
        elif text.startswith(("\\]", "\\)"), index):
            errors.append(f"{text[index : index + 2]} without an opener at offset {index}")
            index += 2
            continue
        elif text[index] == "$":
            index, closed = _inline_dollar(text, index, errors)
            pairs += closed
            continue
        else:
            index += 1
            continue
        if close < 0:
            errors.append(f"{opener} at offset {index} is never closed")
            index += len(opener)
        else:
            pairs += 1
            index = close + 2
    return pairs, errors


def every_period_loop(tokens: list[str]) -> _Loop | None:
    """The loop search trying every period's runs."""
    if len(tokens) < 2:
        return None
    vocabulary: dict[str, int] = {}
    ids = np.array([vocabulary.setdefault(t, len(vocabulary)) for t in tokens])
    best: _Loop | None = None
    for period in range(1, min(LOOP_MAX_PERIOD_TOKENS, len(tokens) // 2) + 1):
        for start, length in _true_runs(ids[:-period] == ids[period:]):
            repeats = (length + period) // period
            unit = tokens[start : start + period]
            if repeats < LOOP_MIN_REPEATS or not any(c.isalnum() for t in unit for c in t):
                continue
            candidate = _Loop(start=start, period=period, repeats=repeats)
            if best is None or candidate.redundant_tokens > best.redundant_tokens:
                best = candidate
    return best


MATH_PIECES = ["$", "$$", "\\", "[", "]", "(", ")", " ", "\n", "\n\n", "x", "5", "a b", "`"]


def test_the_latex_scan_finds_what_a_stepping_scan_finds() -> None:
    rng = random.Random(20261206)
    flagged = balanced = 0
    for _ in range(4000):
        text = "".join(rng.choices(MATH_PIECES, k=rng.randint(0, 60)))
        expected = stepping_scan_math(text)
        assert checks._scan_math(text) == expected, repr(text)
        flagged += bool(expected[1])
        balanced += expected[0] > 0 and not expected[1]
    # The generated pages reach both verdicts many times over.
    assert flagged > 1000 and balanced > 100


def test_the_loop_search_finds_what_trying_every_period_finds() -> None:
    rng = random.Random(1085)
    words = ["total", "EUR", "12.50", "item", "|", "---", "**", "Rechnung", "0.00"]
    loops = 0
    for _ in range(600):
        tokens = rng.choices(words, k=rng.randint(0, 80))
        # A unit repeated around the thresholds, at a random place, sometimes markup alone.
        period = rng.randint(1, 30)
        unit = rng.choices(["|", "---"] if rng.random() < 0.2 else words, k=period)
        at = rng.randint(0, len(tokens))
        tokens[at:at] = unit * rng.randint(1, LOOP_MIN_REPEATS + 3)
        tokens += rng.choices(words, k=rng.randint(0, 40))
        expected = every_period_loop(tokens)
        assert checks._longest_loop(tokens) == expected, tokens
        loops += expected is not None
    assert 100 < loops < 550


def stepping_split_row(line: str) -> list[str]:
    """A table row's cells read one character at a time."""
    cells: list[str] = []
    current: list[str] = []
    in_code = False
    text = line.strip()
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text) and text[index + 1] == "|":
            current.append("|")
            index += 2
            continue
        if char == "`":
            in_code = not in_code
        if char == "|" and not in_code:
            cells.append("".join(current))
            current = []
        else:
            current.append(char)
        index += 1
    cells.append("".join(current))
    if text.startswith("|"):
        cells = cells[1:]
    if text.endswith("|") and not text.endswith("\\|") and cells:
        cells = cells[:-1]
    return [cell.strip() for cell in cells]


ROW_PIECES = ["|", "|", "\\|", "\\", "`", " ", "  ", "12.50", "EUR", "**Total**", "---"]


def test_a_table_row_splits_as_a_stepping_reading_splits_it() -> None:
    rng = random.Random(3700)
    plain = 0
    for _ in range(4000):
        line = "".join(rng.choices(ROW_PIECES, k=rng.randint(0, 16)))
        assert split_row(line) == stepping_split_row(line), repr(line)
        plain += "\\" not in line and "`" not in line
    assert 300 < plain < 3700  # both ways of splitting are taken many times
