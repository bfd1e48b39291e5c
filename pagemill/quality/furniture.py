"""Page furniture: running headers and footers and page numbers, told apart from the body.

Engines read a page's header and footer like any other text, so a document assembled from
its pages repeats "ACME Ltd - Invoice 123 - Page 2 of 5" between every two pages. This
module finds such lines in the pages' Markdown, whatever engine wrote it, and decides per
line whether it stays in document.md. It never discards anything: every line it finds is
reported per page, with where it went, so callers can list it in manifest.json.

What counts as furniture (conservative: a miss leaves noise, a false hit would move body):
- Only lines among the first or last `EDGE_LINES` non-blank lines of a page; never a table
  row, an HTML comment, an image or a line without a letter or digit.
- A *running* line repeats at the edge of at least half of the document's pages (and at
  least two) with the same text but for its page counter: "Invoice 123 - Page 2 of 5" and
  "Invoice 123 - Page 3 of 5" are the same line. A counter is a digit run that stands
  where a page number would ("page 3", "3 of 7", "- 3 -", alone) and goes up with the
  page; any other digits are content, so "Invoice 41" and "Invoice 42" never match.
- A *page number* is a line that is nothing but one: "Page 3", "Page 3 of 7", "- 3 -",
  "3 of 7", "3/7", or a running line that says nothing besides its counter. A bare "3" is
  ambiguous, so outside a running counter it counts only as the very first or last line
  of its page and equal to that page's number. A single-page document has no running
  lines, only these page numbers.

The rule that nothing is lost: a running line that carries more than a page number (an
invoice number, a total, a customer's name) keeps its first occurrence in the body; only
its repeats on later pages move out. Lines whose digits differ anywhere but in the page
counter are different lines, so a batch of invoices keeps each invoice's header.

Modes: `separate` (the default) moves page numbers and repeats out of document.md;
`inline` leaves every line where it was; `drop` also removes the first occurrence of a
running line, but only when every word of it appears elsewhere in the document's body,
so a header that is the only place an invoice number is printed stays even then.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

# Headers and footers are short: a company line, an address, a page number. Three lines
# at each end hold them without reaching into the body of any but the shortest pages.
EDGE_LINES = 3
# The longest line taken for furniture: a full A4 line of 8 pt type is about 130
# characters; a repeated paragraph is longer and is body text.
MAX_FURNITURE_CHARS = 160
# A running line is on at least this share of the pages that have text (first and last
# pages often have their own header, so not all of them).
RUNNING_SHARE = 0.5
# "3/7" without the word "page" is a page number only while the total is plausible,
# so "12/2023" stays a date.
MAX_BARE_PAGE_TOTAL = 999

_PAGE_WORDS = frozenset(
    ("page", "pages", "pg", "p", "seite", "pagina", "página", "blz", "blad", "folio", "sheet")
)
_OF = r"(?:of|von|van|de|di|sur|/)"
_WORDED_PAGE_NUMBER = re.compile(
    rf"\b(?:{'|'.join(sorted(_PAGE_WORDS, key=len, reverse=True))})\.?\s*:?\s*(\d+)"
    rf"(?:\s*{_OF}\s*(\d+))?"
)
_DASHES = "-\u2013\u2014"  # hyphen, en dash, em dash
_DASHED_PAGE_NUMBER = re.compile(rf"[{_DASHES}]\s*(\d+)\s*[{_DASHES}]")
_PAGE_OF_TOTAL = re.compile(rf"(\d+)\s*{_OF}\s*(\d+)")
_COUNTER_AND_TOTAL = re.compile(rf"#\s*{_OF}\s*\d+")
_DIGITS = re.compile(r"\d+")
_MARKUP = re.compile(r"[*_`~]+|</?u>")
_HEADING = re.compile(r"^#{1,6}\s+")
_LINE_BREAK_TAG = re.compile(r"<br\s*/?>")


class FurnitureMode(StrEnum):
    separate = "separate"
    inline = "inline"
    drop = "drop"


class FurnitureKind(StrEnum):
    page_number = "page_number"
    running = "running"


@dataclass(frozen=True)
class Furniture:
    text: str
    position: str  # "top" or "bottom"
    kind: FurnitureKind
    in_document: bool  # whether this mode left it in document.md

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "position": self.position,
            "kind": str(self.kind),
            "in_document": self.in_document,
        }


@dataclass(frozen=True)
class PageSplit:
    number: int
    body: str | None  # the page's Markdown as it goes into document.md; None for a failed page
    furniture: list[Furniture]


@dataclass(frozen=True)
class _Line:
    page: int
    index: int  # in the page's Markdown split on "\n"
    text: str
    plain: str  # lower case, without Markdown emphasis or heading marks
    position: str
    at_very_edge: bool

    @property
    def skeleton(self) -> str:
        return _DIGITS.sub("#", self.plain)

    @property
    def numbers(self) -> list[int]:
        return [int(digits) for digits in _DIGITS.findall(self.plain)]

    @property
    def key(self) -> tuple[int, int]:
        return (self.page, self.index)


@dataclass(frozen=True)
class _Found:
    line: _Line
    kind: FurnitureKind
    # For a running line with content: its text with the page counter blanked, so a
    # later line with the same key repeats it. None for a page number.
    content_key: str | None = None


def split_pages(pages: Sequence[tuple[int, str | None]], mode: FurnitureMode) -> list[PageSplit]:
    """Each page's body for document.md and the furniture found on it, in page order."""
    ordered = sorted(pages, key=lambda page: page[0])
    texts = {number: markdown for number, markdown in ordered if markdown and markdown.strip()}
    found = _find(texts)
    stays = _stays_in_document(found, texts, mode)
    found_on: dict[int, list[_Found]] = defaultdict(list)
    for item in found:
        found_on[item.line.page].append(item)
    splits = []
    for number, markdown in ordered:
        on_page = found_on[number]
        removed = {item.line.index for item in on_page if not stays[item.line.key]}
        body = _without_lines(markdown, removed) if markdown is not None and removed else markdown
        furniture = [
            Furniture(item.line.text, item.line.position, item.kind, stays[item.line.key])
            for item in on_page
        ]
        splits.append(PageSplit(number=number, body=body, furniture=furniture))
    return splits


def _find(texts: dict[int, str]) -> list[_Found]:
    candidates = [line for number, text in texts.items() for line in _edge_lines(number, text)]
    needed = max(2, math.ceil(RUNNING_SHARE * len(texts)))
    found: dict[tuple[int, int], _Found] = {}
    for group in _same_but_digits(candidates):
        counters = _counter_slots(group)
        by_key: dict[str, list[_Line]] = defaultdict(list)
        for line in group:
            by_key[_content_key(line, counters)].append(line)
        # Running: the same text, but for the page counter, on enough pages.
        for key, lines in by_key.items():
            if len(lines) >= needed:
                found.update((line.key, _classify_running(line, key)) for line in lines)
    for line in candidates:
        if line.key not in found and _is_page_number(line):
            found[line.key] = _Found(line, FurnitureKind.page_number)
    return sorted(found.values(), key=lambda item: item.line.key)


def _edge_lines(number: int, markdown: str) -> list[_Line]:
    filled = [(index, line) for index, line in enumerate(markdown.split("\n")) if line.strip()]
    count = len(filled)
    lines = []
    for rank, (index, text) in enumerate(filled):
        if EDGE_LINES <= rank < count - EDGE_LINES or not _may_be_furniture(text):
            continue
        top = rank < EDGE_LINES and rank <= count - 1 - rank
        plain = " ".join(_HEADING.sub("", _MARKUP.sub("", text.strip())).lower().split())
        lines.append(
            _Line(
                page=number,
                index=index,
                text=text.strip(),
                plain=plain,
                position="top" if top else "bottom",
                at_very_edge=rank in (0, count - 1),
            )
        )
    return lines


def _may_be_furniture(text: str) -> bool:
    stripped = text.strip()
    if stripped.startswith(("|", "<!--", "![", "```", "~~~")):
        return False
    # Headers and footers are a line of print; a paragraph that happens to repeat at
    # the edge of two pages is body text.
    if len(stripped) > MAX_FURNITURE_CHARS:
        return False
    return any(char.isalnum() for char in stripped)


def _same_but_digits(candidates: list[_Line]) -> list[list[_Line]]:
    """Edge lines grouped by their text with digits ignored, one line per page, where
    the text is on more than one page."""
    by_skeleton: dict[str, dict[int, _Line]] = defaultdict(dict)
    for line in candidates:
        by_skeleton[line.skeleton].setdefault(line.page, line)
    return [list(lines.values()) for lines in by_skeleton.values() if len(lines) > 1]


def _counter_slots(group: list[_Line]) -> set[int]:
    """Digit runs that read as a page number where they stand ("page 3", "3 of 7", "- 3 -",
    a line of its own) and go up with the page at a fixed offset: the page counter.
    Without the first condition "Invoice 41" and "Invoice 42" on consecutive pages
    would pass for a counter, and the second invoice's number would be moved out."""
    slots = set()
    for slot in set.intersection(*(_page_number_slots(line.plain) for line in group)):
        offsets = {line.numbers[slot] - line.page for line in group}
        values = {line.numbers[slot] for line in group}
        if len(offsets) == 1 and len(values) > 1:
            slots.add(slot)
    return slots


def _page_number_slots(plain: str) -> set[int]:
    """Which digit runs of the line (by position) stand where a page number would."""
    starts = [match.start() for match in _DIGITS.finditer(plain)]
    at: set[int] = set()
    for pattern in (_WORDED_PAGE_NUMBER, _DASHED_PAGE_NUMBER, _PAGE_OF_TOTAL):
        for match in pattern.finditer(plain):
            if pattern is _PAGE_OF_TOTAL and int(match[2]) > MAX_BARE_PAGE_TOTAL:
                continue
            at.add(match.start(1))
    if _DIGITS.fullmatch(plain):
        at.add(0)
    return {slot for slot, start in enumerate(starts) if start in at}


def _content_key(line: _Line, counters: set[int]) -> str:
    """The line with its page counter blanked: equal keys say the same thing."""
    slots = iter(range(len(line.numbers)))
    return _DIGITS.sub(lambda match: "#" if next(slots) in counters else match[0], line.plain)


def _classify_running(line: _Line, key: str) -> _Found:
    if _is_worded_page_number(line.plain) or not _content_words(key):
        return _Found(line, FurnitureKind.page_number)
    return _Found(line, FurnitureKind.running, key)


def _content_words(key: str) -> set[str]:
    """What a line says besides its page number: "invoice 123 - page # of 5" -> {invoice, 123}."""
    without_page = _COUNTER_AND_TOTAL.sub("#", key)
    return {word for word in _words(without_page) if word not in _PAGE_WORDS}


def _is_page_number(line: _Line) -> bool:
    if _is_worded_page_number(line.plain):
        return True
    of_total = _PAGE_OF_TOTAL.fullmatch(line.plain)
    if of_total:
        return 1 <= int(of_total[1]) <= int(of_total[2]) <= MAX_BARE_PAGE_TOTAL
    # A bare number is ambiguous: only at the very edge, and only this page's own number.
    return (
        bool(_DIGITS.fullmatch(line.plain)) and line.at_very_edge and int(line.plain) == line.page
    )


def _is_worded_page_number(plain: str) -> bool:
    if _DASHED_PAGE_NUMBER.fullmatch(plain):
        return True
    match = _WORDED_PAGE_NUMBER.fullmatch(plain)
    return match is not None and (match[2] is None or int(match[1]) <= int(match[2]))


def _stays_in_document(
    found: list[_Found], texts: dict[int, str], mode: FurnitureMode
) -> dict[tuple[int, int], bool]:
    """Whether each found line stays in document.md, by (page, line index)."""
    if mode is FurnitureMode.inline:
        return {item.line.key: True for item in found}
    firsts: dict[str, _Found] = {}
    for item in found:  # in page order
        if item.content_key is not None:
            firsts.setdefault(item.content_key, item)
    stays = {item.line.key: False for item in found}
    body_words = _body_words(found, texts) if mode is FurnitureMode.drop else set()
    for key, first in firsts.items():
        # separate keeps every first occurrence; drop only one that says something
        # printed nowhere else in the body.
        stays[first.line.key] = mode is FurnitureMode.separate or not (
            _content_words(key) <= body_words
        )
    return stays


def _body_words(found: list[_Found], texts: dict[int, str]) -> set[str]:
    furniture = {item.line.key for item in found}
    # The body's lines joined by a cell break, so that the markup, case and word passes
    # run once over the document rather than once a line: "|" is a word break and is
    # part of no markup, so no match spans two lines and the words are those of each
    # line alone.
    body = "|".join(
        line
        for number, text in texts.items()
        for index, line in enumerate(text.split("\n"))
        if (number, index) not in furniture
    )
    return _word_set(_MARKUP.sub("", body).lower())


_WORD_PUNCTUATION = f".,:;!?()[]{{}}\"'#{_DASHES}"


def _words(text: str) -> list[str]:
    """Words split at spaces and table-cell breaks, without the punctuation around them:
    "INV/2023/03/0008" stays one word, so a drop never relies on its pieces being
    scattered elsewhere."""
    stripped = (word.strip(_WORD_PUNCTUATION) for word in _split_words(text))
    return [word for word in stripped if word and any(char.isalnum() for char in word)]


def _word_set(text: str) -> set[str]:
    """The distinct words of `_words(text)`: each written form is stripped and tested
    once, however often a document repeats it."""
    stripped = {word.strip(_WORD_PUNCTUATION) for word in set(_split_words(text))}
    return {word for word in stripped if word and any(char.isalnum() for char in word)}


def _split_words(text: str) -> list[str]:
    """`text` split at white space, table-cell bars and <br> tags. str.split rather than
    one regular expression over the three: a document's body is some 100,000
    characters, and the expression's alternation, tried at each, took 6 ms of it."""
    return _LINE_BREAK_TAG.sub(" ", text).replace("|", " ").split()


def _without_lines(markdown: str, removed: set[int]) -> str:
    """The page without the removed lines; the blank lines around each removed line
    collapse to one, so removal leaves no gap."""
    kept: list[str] = []
    after_removal = False
    for index, line in enumerate(markdown.split("\n")):
        if index in removed:
            after_removal = True
            continue
        if not line.strip() and after_removal and (not kept or not kept[-1].strip()):
            continue
        after_removal = after_removal and not line.strip()
        kept.append(line)
    return "\n".join(kept).strip()
