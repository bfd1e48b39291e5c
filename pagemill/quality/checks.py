"""Deterministic checks on one page's Markdown, whatever engine wrote it.

They look for the errors that readers miss and downstream tools choke on: a model stuck
in a loop, a broken table, unbalanced formula delimiters, a page cut off at the token cap,
nothing read from a page with ink on it, text invented for a blank page. Each is a pure
function returning a `CheckResult` under a stable name; `run_checks` runs all that apply.

A check's score is exactly 1.0 when it passes and below 1.0, down to 0.0, by how badly it
fails. How the scores combine into a page score lives in `pagemill.quality.score`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np


class CheckName(StrEnum):
    REPETITION = "repetition"
    TABLES = "tables"
    LATEX = "latex"
    TRUNCATION = "truncation"
    EMPTY_OUTPUT = "empty_output"
    BLANK_INVENTED = "blank_invented"


@dataclass(frozen=True)
class CheckResult:
    name: CheckName
    passed: bool
    score: float  # 1.0 when passed, lower the worse the failure, never below 0.0
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": str(self.name),
            "passed": self.passed,
            "score": self.score,
            "detail": self.detail,
        }


def _passed(name: CheckName, detail: str) -> CheckResult:
    return CheckResult(name=name, passed=True, score=1.0, detail=detail)


def _failed(name: CheckName, score: float, detail: str) -> CheckResult:
    # A failure never scores 1.0, so `score == 1.0` and `passed` always agree.
    return CheckResult(name=name, passed=False, score=min(max(score, 0.0), 0.999), detail=detail)


def run_checks(
    markdown: str,
    *,
    finish_reason: str | None = None,
    output_tokens: int | None = None,
    max_output_tokens: int | None = None,
    page_is_blank: bool | None = None,
) -> list[CheckResult]:
    """Every check that the known facts allow: the two about ink need `page_is_blank`."""
    results = [
        check_repetition(markdown),
        check_tables(markdown),
        check_latex(markdown),
        check_truncation(finish_reason, output_tokens, max_output_tokens),
    ]
    if page_is_blank is not None:
        results.append(check_empty_output(markdown, page_is_blank))
        results.append(check_blank_invented(markdown, page_is_blank))
    return results


# --- repetition ----------------------------------------------------------------------------

# A unit of up to this many tokens repeated back to back is a loop candidate: a word, a
# phrase, a table row or a few lines. Longer units are whole passages, which are rare loops.
LOOP_MAX_PERIOD_TOKENS = 120
# A loop is a unit repeated at least this many times in a row...
LOOP_MIN_REPEATS = 8
# ...whose copies, beyond the first, add up to at least this many tokens. Legitimate pages
# repeat too (a row of zeros across a wide table, a few identical table rows); together the
# two bounds let those through while decoding loops, which run for hundreds of copies until
# the token cap, fail well inside them.
LOOP_MIN_REDUNDANT_TOKENS = 48

# Words keep inner punctuation ("1,939.00", "e-mail"); any other run of non-space symbols
# ("|", "---", "**") is one token, so markup takes part in a unit without dominating it.
# Possessive: a token never gives back characters it matched, which no token needs, and
# matching runs a tenth faster.
_TOKEN = re.compile(r"\w++(?:[.,:/'\u2019-]\w++)*+|[^\w\s]++")


@dataclass(frozen=True)
class _Loop:
    start: int  # index of the first token of the first copy
    period: int  # tokens in the repeated unit
    repeats: int  # copies of the unit back to back, the first one included

    @property
    def redundant_tokens(self) -> int:
        return self.period * (self.repeats - 1)


def check_repetition(markdown: str) -> CheckResult:
    """Fails on a unit of text repeated back to back many times: a decoding loop."""
    tokens = _TOKEN.findall(markdown)
    loop = _longest_loop(tokens)
    if loop is None:
        return _passed(CheckName.REPETITION, "no repeated run")
    if loop.redundant_tokens < LOOP_MIN_REDUNDANT_TOKENS:
        return _passed(CheckName.REPETITION, f"short repeated run ({loop.repeats} copies)")
    unit = " ".join(tokens[loop.start : loop.start + loop.period])
    share = loop.redundant_tokens / len(tokens)
    detail = (
        f"{loop.period}-token unit repeated {loop.repeats} times in a row "
        f"({share:.0%} of the page): {unit[:80]!r}"
    )
    return _failed(CheckName.REPETITION, 1.0 - share, detail)


def _longest_loop(tokens: list[str]) -> _Loop | None:
    """Of the units holding a word and repeated back to back at least LOOP_MIN_REPEATS
    times, the one whose copies take up the most tokens.

    Units of markup alone (the pipes of an empty table, a dotted leader) are not loops:
    forms legitimately repeat them, and a runaway of pure markup hits the token cap anyway.
    """
    if len(tokens) < 2:
        return None
    # Each token's id is the index of its first occurrence: equal tokens, equal ids. The
    # mapping runs in C (map over dict.setdefault), a third faster than a generator.
    first_seen: dict[str, int] = {}
    ids = np.fromiter(
        map(first_seen.setdefault, tokens, range(len(tokens))),
        dtype=np.int32,
        count=len(tokens),
    )
    most = min(LOOP_MAX_PERIOD_TOKENS, len(tokens) // 2)
    matches = _matches_by_period(ids, most)
    # A sum of the booleans, half the time of np.count_nonzero along an axis.
    counts = matches.sum(axis=1, dtype=np.int32)
    best: _Loop | None = None
    for period in range(1, most + 1):
        # LOOP_MIN_REPEATS copies need a run of (LOOP_MIN_REPEATS - 1) * period matches: a
        # period with fewer in all holds none, which on a page of prose is nearly every
        # period, and counting them costs a fraction of finding the runs.
        if counts[period - 1] < (LOOP_MIN_REPEATS - 1) * period:
            continue
        same = matches[period - 1, : len(tokens) - period]
        if not _may_hold_run(same, period):
            continue
        for start, length in _true_runs(same):
            repeats = (length + period) // period
            if repeats < LOOP_MIN_REPEATS or not _has_word(tokens[start : start + period]):
                continue
            candidate = _Loop(start=start, period=period, repeats=repeats)
            if best is None or candidate.redundant_tokens > best.redundant_tokens:
                best = candidate
    return best


def _matches_by_period(ids: np.ndarray, most: int) -> np.ndarray:
    """Row p - 1 says where each token equals the one p places on (p = 1..most), all
    periods in one comparison: one comparison per period took 1.8 times as long on an
    invoice page. Past the end of the tokens a row holds False."""
    padded = np.concatenate((ids, np.full(most, -1, dtype=ids.dtype)))
    ahead = np.lib.stride_tricks.sliding_window_view(padded, len(ids))[1 : most + 1]
    matches: np.ndarray = ahead == ids
    return matches


def _may_hold_run(same: np.ndarray, period: int) -> bool:
    """False when `same` cannot hold the (LOOP_MIN_REPEATS - 1) * period matches in a row
    that a loop needs. Such a run covers at least LOOP_MIN_REPEATS - 2 whole blocks of
    `period` flags, counted from the first: the matches a table's pipes make at every
    period are scattered, and seldom fill a block."""
    whole = len(same) // period * period
    full_blocks = same[:whole].reshape(-1, period).all(axis=1)
    return int(np.count_nonzero(full_blocks)) >= LOOP_MIN_REPEATS - 2


def _has_word(tokens: list[str]) -> bool:
    return any(char.isalnum() for token in tokens for char in token)


def _true_runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """(start, length) of each maximal run of True, longest first, at most a few."""
    padded = np.concatenate(([False], flags, [False]))
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    starts, ends = edges[0::2], edges[1::2]
    lengths = ends - starts
    # The longest runs decide the result; a few more cover a long run of a markup-only unit
    # hiding a slightly shorter wordy one at the same period.
    order = np.argsort(-lengths, kind="stable")[:4]
    return [(int(starts[i]), int(lengths[i])) for i in order]


# --- tables --------------------------------------------------------------------------------

_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_TABLE_LINE = re.compile(r"^\s{0,3}\|")
_SEPARATOR_CELL = re.compile(r"^\s*:?-+:?\s*$")
_HTML_TABLE_TAGS = ("table", "tr", "td", "th")


@dataclass(frozen=True)
class MarkdownTable:
    first_line: int  # 1-based line number in the page's Markdown
    rows: list[list[str]]  # every row as written, the separator row included


def find_tables(markdown: str) -> list[MarkdownTable]:
    """Blocks of consecutive lines starting with a pipe, outside fenced code."""
    tables: list[MarkdownTable] = []
    block: list[list[str]] = []
    block_start = 0
    in_code = False
    for number, line in enumerate(markdown.splitlines(), start=1):
        if _FENCE.match(line):
            in_code = not in_code
        is_row = not in_code and _TABLE_LINE.match(line) is not None
        if is_row:
            if not block:
                block_start = number
            block.append(split_row(line))
        elif block:
            tables.append(MarkdownTable(first_line=block_start, rows=block))
            block = []
    if block:
        tables.append(MarkdownTable(first_line=block_start, rows=block))
    return tables


def split_row(line: str) -> list[str]:
    """Cells of one table row: pipes escaped as \\| or inside `code` do not split."""
    text = line.strip()
    # Most rows hold neither an escape nor code: every pipe splits (a table page has dozens
    # of rows, and the character-by-character reading below is ten times slower).
    cells = text.split("|") if "\\" not in text and "`" not in text else _cells_read(text)
    # The leading pipe opens the first cell and a trailing one closes the last: neither
    # stands for a cell of its own.
    if text.startswith("|"):
        cells = cells[1:]
    if text.endswith("|") and not text.endswith("\\|") and cells:
        cells = cells[:-1]
    return [cell.strip() for cell in cells]


def _cells_read(text: str) -> list[str]:
    cells: list[str] = []
    current: list[str] = []
    in_code = False
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
    return cells


def is_separator_row(cells: list[str]) -> bool:
    return bool(cells) and all(_SEPARATOR_CELL.match(cell) for cell in cells)


def table_problem(table: MarkdownTable) -> str | None:
    """What makes a table malformed, or None when it is well formed."""
    rows = table.rows
    if len(rows) < 2 or not is_separator_row(rows[1]):
        return "no header separator row under the first row"
    width = len(rows[0])
    for index, row in enumerate(rows[1:], start=2):
        if len(row) != width:
            return f"row {index} has {len(row)} cells, the header has {width}"
    return None


def check_tables(markdown: str) -> CheckResult:
    """Every Markdown table has a header separator and the same cell count on every row;
    HTML tables, where an engine writes them, open and close each table, row and cell."""
    tables = find_tables(markdown)
    problems = []
    for number, table in enumerate(tables, start=1):
        problem = table_problem(table)
        if problem is not None:
            problems.append(f"table {number} (line {table.first_line}): {problem}")
    html_problem = _html_table_problem(markdown)
    total = len(tables)
    if html_problem is not None:
        problems.append(html_problem)
        total += 1
    if not problems:
        return _passed(CheckName.TABLES, f"{len(tables)} table(s) well formed")
    well_formed = total - len(problems)
    return _failed(CheckName.TABLES, well_formed / total, "; ".join(problems))


def _html_table_problem(markdown: str) -> str | None:
    lowered = markdown.lower()
    for tag in _HTML_TABLE_TAGS:
        opened = len(re.findall(rf"<{tag}[\s>]", lowered))
        closed = lowered.count(f"</{tag}>")
        if opened != closed:
            return f"HTML <{tag}> opened {opened} times, closed {closed}"
    return None


# --- LaTeX delimiters ----------------------------------------------------------------------

_CODE_BLOCK = re.compile(r"^\s{0,3}(```|~~~).*?^\s{0,3}\1[^\n]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.DOTALL)
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
# "$5", "$ 1,939.00": a currency amount, literal text when no closing dollar follows.
_CURRENCY = re.compile(r"\$\s?\d")


def check_latex(markdown: str) -> CheckResult:
    """$...$, $$...$$, \\(...\\) and \\[...\\] are balanced outside code.

    Inline math follows Pandoc's reading: `$` opens only before a non-space and closes only
    after one, not before a digit, and never across a blank line; so "$5 and $10" is
    currency, while "$x^2 + y" with no closing `$` is a broken formula.
    """
    text = _without_code(markdown)
    # An escaped backslash and an escaped dollar are plain text; blanking them keeps the
    # "\\[2pt]" of a LaTeX row break from reading as a display opener.
    text = text.replace("\\\\", "  ").replace("\\$", "  ")
    pairs, errors = _scan_math(text)
    if not errors:
        return _passed(CheckName.LATEX, f"{pairs} formula(s) balanced")
    detail = "; ".join(errors[:5]) + (f"; and {len(errors) - 5} more" if len(errors) > 5 else "")
    return _failed(CheckName.LATEX, pairs / (pairs + len(errors)), detail)


def _without_code(markdown: str) -> str:
    # Replaced by spaces of the same length so positions in error messages still hold.
    def blank(match: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", match.group(0))

    return _CODE_SPAN.sub(blank, _CODE_BLOCK.sub(blank, markdown))


# Where a formula can open or close: the scan jumps from one to the next rather than
# stepping through every character (a page of Markdown is a few thousand).
_MATH_MARK = re.compile(r"\$|\\[\[\]()]")


def _scan_math(text: str) -> tuple[int, list[str]]:
    pairs = 0
    errors: list[str] = []
    index = 0
    while (mark := _MATH_MARK.search(text, index)) is not None:
        index = mark.start()
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
        else:  # a single $
            index, closed = _inline_dollar(text, index, errors)
            pairs += closed
            continue
        if close < 0:
            errors.append(f"{opener} at offset {index} is never closed")
            index += len(opener)
        else:
            pairs += 1
            index = close + 2
    return pairs, errors


def _inline_dollar(text: str, index: int, errors: list[str]) -> tuple[int, bool]:
    """Where scanning resumes after a single `$`, and whether it opened a closed formula."""
    after = text[index + 1 : index + 2]
    if not after or after.isspace():
        return index + 1, False  # "$ " opens nothing: a literal dollar
    end = _paragraph_end(text, index)
    close = index + 1
    while True:
        close = text.find("$", close + 1, end)
        if close < 0:
            break
        closes = not text[close - 1].isspace() and not text[close + 1 : close + 2].isdigit()
        if closes and not text.startswith("$$", close):
            return close + 1, True
    if not _CURRENCY.match(text, index):
        errors.append(f"$ at offset {index} is never closed")
    return index + 1, False


def _paragraph_end(text: str, index: int) -> int:
    found = _PARAGRAPH_BREAK.search(text, index)
    return found.start() if found else len(text)


def _find_in_paragraph(text: str, needle: str, start: int) -> int:
    return text.find(needle, start, _paragraph_end(text, start))


# --- truncation, empty and invented output -------------------------------------------------


def check_truncation(
    finish_reason: str | None, output_tokens: int | None, max_output_tokens: int | None
) -> CheckResult:
    """The engine stopped because it ran out of tokens, not because the page ended."""
    if finish_reason == "length":
        return _failed(CheckName.TRUNCATION, 0.0, 'finish_reason is "length"')
    at_cap = (
        output_tokens is not None
        and max_output_tokens is not None
        and output_tokens >= max_output_tokens
    )
    if at_cap:
        detail = f"{output_tokens} output tokens reached the cap of {max_output_tokens}"
        return _failed(CheckName.TRUNCATION, 0.0, detail)
    return _passed(CheckName.TRUNCATION, f"finish_reason {finish_reason!r}")


def check_empty_output(markdown: str, page_is_blank: bool) -> CheckResult:
    """A page with ink on it must give some text."""
    if page_is_blank or markdown.strip():
        return _passed(CheckName.EMPTY_OUTPUT, "page blank" if page_is_blank else "output present")
    return _failed(CheckName.EMPTY_OUTPUT, 0.0, "no output from a page with ink")


def check_blank_invented(markdown: str, page_is_blank: bool) -> CheckResult:
    """A blank page must give empty output: anything else was made up."""
    if not page_is_blank or not markdown.strip():
        return _passed(CheckName.BLANK_INVENTED, "nothing invented")
    detail = f"{len(markdown.strip())} characters of output from a blank page"
    return _failed(CheckName.BLANK_INVENTED, 0.0, detail)
