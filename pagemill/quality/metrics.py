"""Metrics against ground truth, for `pagemill eval`: text, invoice fields and tables.

Text is compared after `normalise_text`: Markdown markup stripped, Unicode compatibility
forms folded (ligatures, full-width digits), whitespace collapsed. Layout is not what
these measure: the checks and the table metric cover structure.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from rapidfuzz.distance import Indel, Levenshtein

from pagemill.quality.checks import find_tables, is_separator_row

# --- text ----------------------------------------------------------------------------------

_MARKUP_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"<!--.*?-->", re.DOTALL), " "),
    (re.compile(r"</?[A-Za-z][^>]*>"), " "),
    (re.compile(r"!\[([^\]]*)\]\([^)]*\)"), r"\1"),  # image: keep the alt text
    (re.compile(r"\[([^\]]*)\]\([^)]*\)"), r"\1"),  # link: keep the text
    (re.compile(r"^\s{0,3}(```|~~~).*$", re.MULTILINE), " "),  # fence lines, not the code
    (re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-+:?\s*)*\|?\s*$", re.MULTILINE), " "),
    (re.compile(r"^\s{0,3}#{1,6}\s+", re.MULTILINE), ""),  # headings
    (re.compile(r"^\s{0,3}>\s?", re.MULTILINE), ""),  # block quotes
    (re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$", re.MULTILINE), " "),  # thematic breaks
    (re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+", re.MULTILINE), ""),  # list markers
    (re.compile(r"(\*{1,3})(?=\S)(.+?)(?<=\S)\1"), r"\2"),  # emphasis
    # Underscores emphasise only at word edges: snake_case_names keep theirs.
    (re.compile(r"(?<!\w)(_{1,3})(?=\S)(.+?)(?<=\S)\1(?!\w)"), r"\2"),
    (re.compile(r"`+"), ""),
    (re.compile(r"\|"), " "),  # table cell borders
)
_ESCAPED = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|$<>~])")
# Escaped punctuation is parked in a private use plane while markup is stripped, so "\*"
# never reads as emphasis, then put back as the plain character. Plane 15 rather than the
# BMP's private area, where symbol fonts in PDFs put their glyphs.
_PARKED = 0xF0000
_PARKED_RANGE = re.compile("[\U000f0000-\U000f007f]")
_WORD = re.compile(r"\w+(?:['\u2019.,:/-]\w+)*")


def normalise_text(markdown: str) -> str:
    """The reading text of a page: no markup, compatibility forms folded, single spaces."""
    text = unicodedata.normalize("NFKC", markdown)
    text = _ESCAPED.sub(lambda match: chr(_PARKED + ord(match.group(1))), text)
    for pattern, replacement in _MARKUP_PATTERNS:
        text = pattern.sub(replacement, text)
    text = _PARKED_RANGE.sub(lambda match: chr(ord(match.group(0)) - _PARKED), text)
    return " ".join(text.split())


def character_error_rate(hypothesis: str, reference: str) -> float:
    """Levenshtein edits per reference character, after `normalise_text` on both.

    Not capped at 1: output much longer than the reference (a loop, invented text) scores
    above 1, as it should. An empty reference gives 0.0 for empty output, else 1.0.
    """
    hyp, ref = normalise_text(hypothesis), normalise_text(reference)
    if not ref:
        return 0.0 if not hyp else 1.0
    return Levenshtein.distance(hyp, ref) / len(ref)


def words(text: str) -> list[str]:
    return _WORD.findall(normalise_text(text))


def bag_of_words_error_rate(hypothesis: str, reference: str) -> float:
    """Word errors ignoring reading order (Vidal et al., 2023, "bag-of-words WER").

    bWER = (|N_ref - N_hyp| + sum over words of |count_ref - count_hyp|) / (2 N_ref): a
    misread word costs 1 like a substitution, a missing or extra word costs 1. Two-column
    pages read in the wrong order, which inflate CER, score 0 here.
    """
    ref_counts, hyp_counts = Counter(words(reference)), Counter(words(hypothesis))
    ref_total, hyp_total = sum(ref_counts.values()), sum(hyp_counts.values())
    if ref_total == 0:
        return 0.0 if hyp_total == 0 else 1.0
    differences = sum(abs(ref_counts[w] - hyp_counts[w]) for w in ref_counts.keys() | hyp_counts)
    return (abs(ref_total - hyp_total) + differences) / (2 * ref_total)


# --- invoice fields ------------------------------------------------------------------------

# invoice2data fields that describe the template or are codes derived from the page rather
# than text on it: "desc" and "issuer" name the template, "currency" is an ISO code the page
# may show only as a symbol, the others are codes from standard tables (country, UN/ECE).
STRUCTURAL_FIELDS = frozenset(
    {"desc", "issuer", "currency", "country_code", "state_code", "unece_code", "payment_unece_code"}
)
# Amounts on a page are rounded to cents.
_AMOUNT_TOLERANCE = 0.005
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_NUMBER = re.compile(r"\d+(?:[.,']\d+)*")


@dataclass(frozen=True)
class FieldRecall:
    found: tuple[str, ...]  # field paths such as "amount" or "lines[2].price_unit"
    missing: tuple[str, ...]

    @property
    def recall(self) -> float:
        total = len(self.found) + len(self.missing)
        return len(self.found) / total if total else 1.0


def invoice_field_recall(markdown: str, expected: Mapping[str, Any] | list[Any]) -> FieldRecall:
    """Share of an invoice2data-style record's values that can be found in the output.

    Strings match ignoring case and whitespace; numbers match any number on the page
    however it is written ("1,939.00", "1.939,00", "Rs 1939"); ISO dates match any usual
    spelling of the same day ("03/20/2023", "20-3-2023", "August 3 , 2014", "19 april 2014").
    Nested line items are checked field by field.
    """
    page = _PageValues.of(markdown)
    found: list[str] = []
    missing: list[str] = []
    for path, value in _leaf_fields(expected, ""):
        (found if page.contains(value) else missing).append(path)
    return FieldRecall(found=tuple(found), missing=tuple(missing))


def _leaf_fields(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key not in STRUCTURAL_FIELDS:
                yield from _leaf_fields(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            # The top level of an invoice2data file is a list holding one record.
            yield from _leaf_fields(item, f"{path}[{index}]" if path else "")
    elif value is not None and not isinstance(value, bool) and str(value).strip():
        yield path, value


@dataclass(frozen=True)
class _PageValues:
    squeezed: str  # casefolded, all whitespace removed
    numbers: frozenset[float]
    dates: frozenset[dt.date]

    @classmethod
    def of(cls, markdown: str) -> _PageValues:
        text = normalise_text(markdown).casefold()
        return cls(
            squeezed=_squeeze(text),
            numbers=frozenset(n for token in _NUMBER.findall(text) for n in _readings(token)),
            dates=frozenset(_dates_in(text)),
        )

    def contains(self, value: Any) -> bool:
        if isinstance(value, int | float):
            return self._has_number(float(value))
        text = str(value)
        if _squeeze(normalise_text(text).casefold()) in self.squeezed:
            return True
        if _ISO_DATE.match(text):
            return _parse_date(text) in self.dates
        readings = _readings(text.strip()) if _NUMBER.fullmatch(text.strip()) else []
        return any(self._has_number(number) for number in readings)

    def _has_number(self, number: float) -> bool:
        return any(math.isclose(number, n, abs_tol=_AMOUNT_TOLERANCE) for n in self.numbers)


def _squeeze(text: str) -> str:
    return "".join(text.split())


def _readings(token: str) -> list[float]:
    """Every value a number written with separators can stand for.

    "1,939.00" is 1939.0; "49,99" is 49.99; "1.939" may be 1.939 or 1939 and both are kept:
    a wrong extra reading can only make a field look found by coincidence, a missing one
    would make a correct page look wrong.
    """
    token = token.replace("'", "")
    separators = [c for c in token if c in ".,"]
    if not separators:
        return [float(token)]
    decimal = separators[-1]
    thousands = "," if decimal == "." else "."
    readings = []
    whole, _, fraction = token.rpartition(decimal)
    if thousands not in fraction and whole.replace(thousands, "").isdigit():
        readings.append(float(whole.replace(thousands, "") + "." + fraction))
    groups = token.split(decimal)
    if len(set(separators)) == 1 and all(len(g) == 3 for g in groups[1:]):
        readings.append(float("".join(groups)))  # the only separator grouped thousands
    return readings


# Month names in the languages of the corpus invoices and their neighbours.
_MONTHS: dict[str, int] = {}
for _names in (
    "january february march april may june july august september october november december",
    "januari februari maart april mei juni juli augustus september oktober november december",
    "januar februar märz april mai juni juli august september oktober november dezember",
    "janvier février mars avril mai juin juillet août septembre octobre novembre décembre",
):
    for _number, _name in enumerate(_names.split(), start=1):
        _MONTHS[_name] = _number
        _MONTHS.setdefault(_name[:3], _number)
_MONTHS["sept"] = 9
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DATE_PATTERNS = (
    # 2014-08-03, 2014/8/3
    (re.compile(r"\b(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})\b"), ("y", "m", "d")),
    # 03/20/2023, 20-3-2023, 20.03.23: day and month order both tried
    (re.compile(r"\b(\d{1,2})[-/.](\d{1,2})[-/.](\d{4}|\d{2})\b"), ("a", "b", "y")),
    # 19 april 2014, 3-Aug-2014, 3rd of August 2014
    (
        re.compile(
            rf"\b(\d{{1,2}})(?:st|nd|rd|th)?(?:\s+of)?[\s.-]*({_MONTH})\b\.?[\s,.-]*(\d{{4}})\b"
        ),
        ("d", "mon", "y"),
    ),
    # August 3 , 2014; Aug. 3rd 2014
    (
        re.compile(rf"\b({_MONTH})\b\.?\s*(\d{{1,2}})(?:st|nd|rd|th)?\s*,?\s*(\d{{4}})\b"),
        ("mon", "d", "y"),
    ),
)


def _dates_in(text: str) -> Iterator[dt.date]:
    for pattern, roles in _DATE_PATTERNS:
        for match in pattern.finditer(text):
            parts = dict(zip(roles, match.groups(), strict=True))
            year = int(parts["y"])
            year += 2000 if year < 100 else 0
            if "mon" in parts:
                candidates = [(_MONTHS[parts["mon"]], int(parts["d"]))]
            elif "a" in parts:
                a, b = int(parts["a"]), int(parts["b"])
                candidates = [(b, a), (a, b)]
            else:
                candidates = [(int(parts["m"]), int(parts["d"]))]
            for month, day in candidates:
                date = _safe_date(year, month, day)
                if date is not None:
                    yield date


def _parse_date(iso: str) -> dt.date | None:
    year, month, day = (int(part) for part in iso.split("-"))
    return _safe_date(year, month, day)


def _safe_date(year: int, month: int, day: int) -> dt.date | None:
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


# --- tables --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableAgreement:
    reference_shape: tuple[int, int]  # (rows, columns), header row included
    hypothesis_shape: tuple[int, int]
    rows: float  # fewer rows over more rows, in [0, 1]
    columns: float  # likewise for columns
    cells: float  # text similarity of aligned cells over the larger grid, in [0, 1]


def parse_table(markdown: str) -> list[list[str]]:
    """The first Markdown table in the text as rows of cell text, separator row dropped."""
    tables = find_tables(markdown)
    if not tables:
        return []
    return [row for row in tables[0].rows if not is_separator_row(row)]


def table_agreement(hypothesis: str, reference: str) -> TableAgreement:
    """How well the first table in `hypothesis` matches the first table in `reference`.

    Rows are aligned in order by dynamic programming, so one missing or extra row costs
    that row only rather than shifting every row after it; cells of aligned rows are
    compared column by column with a normalised Indel similarity (1 for equal text, two
    empty cells included). The cell score divides by the larger grid: missing and extra
    cells both count as wrong.
    """
    hyp, ref = _normalised_cells(parse_table(hypothesis)), _normalised_cells(parse_table(reference))
    hyp_shape, ref_shape = _shape(hyp), _shape(ref)
    grid = max(hyp_shape[0], ref_shape[0]) * max(hyp_shape[1], ref_shape[1])
    return TableAgreement(
        reference_shape=ref_shape,
        hypothesis_shape=hyp_shape,
        rows=_ratio(hyp_shape[0], ref_shape[0]),
        columns=_ratio(hyp_shape[1], ref_shape[1]),
        cells=_aligned_similarity(hyp, ref) / grid if grid else 1.0,
    )


def _normalised_cells(rows: list[list[str]]) -> list[list[str]]:
    return [[normalise_text(cell) for cell in row] for row in rows]


def _shape(rows: list[list[str]]) -> tuple[int, int]:
    return len(rows), max((len(row) for row in rows), default=0)


def _ratio(a: int, b: int) -> float:
    return min(a, b) / max(a, b) if max(a, b) else 1.0


def _row_similarity(a: list[str], b: list[str]) -> float:
    """Sum over columns of cell similarity; a row's missing cells are absent, not empty."""
    shared = min(len(a), len(b))
    return sum(Indel.normalized_similarity(a[c], b[c]) for c in range(shared))


def _aligned_similarity(hyp: list[list[str]], ref: list[list[str]]) -> float:
    """Largest total row similarity over order-preserving alignments of the rows."""
    best = [[0.0] * (len(ref) + 1) for _ in range(len(hyp) + 1)]
    for i in range(1, len(hyp) + 1):
        for j in range(1, len(ref) + 1):
            best[i][j] = max(
                best[i - 1][j],
                best[i][j - 1],
                best[i - 1][j - 1] + _row_similarity(hyp[i - 1], ref[j - 1]),
            )
    return best[len(hyp)][len(ref)]
