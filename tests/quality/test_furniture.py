"""Running headers, footers and page numbers, on Markdown written the way engines write it."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pagemill.quality.furniture import (
    FurnitureKind,
    FurnitureMode,
    PageSplit,
    _body_words,
    _Found,
    _Line,
    split_pages,
)
from worker.pipeline import assemble_document

HEADER = "ACME Supplies Ltd - Invoice INV-2024-0042"


def invoice_pages(count: int = 4) -> list[tuple[int, str | None]]:
    """A running header with the invoice number, a body, and a "Page n of N" footer."""
    pages: list[tuple[int, str | None]] = []
    for number in range(1, count + 1):
        body = f"# Delivery notes, part {number}\n\nPallet {number * 7} was checked and signed."
        if number == count:
            body += "\n\nTotal due: EUR 1,234.56"
        pages.append((number, f"{HEADER} \n\n{body} \n\nPage {number} of {count}"))
    return pages


def by_number(splits: list[PageSplit]) -> dict[int, PageSplit]:
    return {split.number: split for split in splits}


def furniture_texts(split: PageSplit) -> list[tuple[str, str, bool]]:
    return [(item.text, str(item.kind), item.in_document) for item in split.furniture]


def test_separate_keeps_the_first_running_header_and_moves_repeats_and_page_numbers() -> None:
    splits = by_number(split_pages(invoice_pages(), FurnitureMode.separate))

    assert furniture_texts(splits[1]) == [
        (HEADER, "running", True),
        ("Page 1 of 4", "page_number", False),
    ]
    for number in (2, 3, 4):
        assert furniture_texts(splits[number]) == [
            (HEADER, "running", False),
            (f"Page {number} of 4", "page_number", False),
        ]
    assert [item.position for item in splits[2].furniture] == ["top", "bottom"]
    assert splits[1].body is not None and splits[1].body.startswith(HEADER)
    assert splits[2].body == "# Delivery notes, part 2\n\nPallet 14 was checked and signed."
    assert splits[4].body is not None and splits[4].body.endswith("Total due: EUR 1,234.56")


def test_inline_leaves_every_page_as_it_was_but_still_reports_the_furniture() -> None:
    pages = invoice_pages()
    splits = split_pages(pages, FurnitureMode.inline)

    assert [split.body for split in splits] == [markdown for _, markdown in pages]
    assert all(item.in_document for split in splits for item in split.furniture)
    assert sum(len(split.furniture) for split in splits) == 8


def test_drop_keeps_a_header_that_is_the_only_place_its_content_is_printed() -> None:
    splits = by_number(split_pages(invoice_pages(), FurnitureMode.drop))

    # INV-2024-0042 is printed nowhere else: the first header stays even when dropping.
    assert furniture_texts(splits[1])[0] == (HEADER, "running", True)
    assert all(not item.in_document for n in (2, 3, 4) for item in splits[n].furniture)
    assert "Page 1 of 4" not in (splits[1].body or "")


def test_drop_removes_a_header_whose_content_the_body_already_has() -> None:
    pages = invoice_pages()
    number, first = pages[1]
    assert first is not None
    pages[1] = (number, first + "\n\nQuestions about invoice INV-2024-0042? ACME Supplies Ltd.")

    dropped = by_number(split_pages(pages, FurnitureMode.drop))
    separate = by_number(split_pages(pages, FurnitureMode.separate))

    assert furniture_texts(dropped[1])[0] == (HEADER, "running", False)
    assert HEADER not in (dropped[1].body or "")
    assert furniture_texts(separate[1])[0] == (HEADER, "running", True)


def test_drop_finds_the_content_in_table_cells() -> None:
    pages = invoice_pages()
    number, first = pages[1]
    assert first is not None
    table = "|Supplier|Invoice|\n|---|---|\n|**ACME** Supplies Ltd|INV-2024-0042<br>2024-03-01|"
    pages[1] = (number, first.replace("Pallet 14", f"{table}\n\nPallet 14"))

    dropped = by_number(split_pages(pages, FurnitureMode.drop))

    assert furniture_texts(dropped[1])[0] == (HEADER, "running", False)


@pytest.mark.parametrize(
    "line",
    [
        "Page 3",
        "page 3 of 7",
        "**Page 3 of 7**",
        "Page: 3 / 7",
        "- 3 -",
        "\u2013 3 \u2013",
        "3 of 7",
        "3/7",
        "Seite 3 von 7",
        "p. 3",
        "3",
    ],
)
@pytest.mark.parametrize("at_top", [False, True])
def test_page_number_lines_on_a_single_page(line: str, at_top: bool) -> None:
    body = "# Receipt\n\nPaid in full.\n\nThank you for your order."
    markdown = f"{line}\n\n{body}" if at_top else f"{body}\n\n{line}"

    (split,) = split_pages([(3, markdown)], FurnitureMode.separate)

    assert furniture_texts(split) == [(line, "page_number", False)]
    assert split.furniture[0].position == ("top" if at_top else "bottom")
    assert split.body == body


@pytest.mark.parametrize(
    "line",
    [
        "42",  # a bare number that is not this page's number
        "12/2023",  # a date, not page 12 of 2023
        "Page 9 of 3",  # not a page of this count
        "See page 3 for the terms",
        "Total: 3",
    ],
)
def test_lines_that_are_not_page_numbers(line: str) -> None:
    markdown = f"# Receipt\n\nPaid in full.\n\n{line}"

    (split,) = split_pages([(3, markdown)], FurnitureMode.separate)

    assert split.furniture == []
    assert split.body == markdown


def test_a_single_page_has_no_running_lines() -> None:
    markdown = "ACME Supplies Ltd\n\n# Invoice 7\n\nTotal 10.00\n\nACME Supplies Ltd"

    (split,) = split_pages([(1, markdown)], FurnitureMode.separate)

    assert split.furniture == [] and split.body == markdown


def test_bare_page_counters_with_an_offset_across_pages() -> None:
    # The cover is unnumbered, so the printed number is one above the page's position.
    pages: list[tuple[int, str | None]] = [
        (n, f"Chapter {n} begins.\n\nIts argument, part {n}.\n\n{n + 1}") for n in range(1, 5)
    ]

    splits = split_pages(pages, FurnitureMode.separate)

    assert [furniture_texts(split) for split in splits] == [
        [(str(n + 1), "page_number", False)] for n in range(1, 5)
    ]


def test_table_rows_and_mid_page_headings_are_never_furniture() -> None:
    table = "|Item|Qty|Price|\n|---|---|---|\n|Widget|1|9.99|"
    filler = "\n\n".join(f"Paragraph {i} of the terms." for i in range(6))
    pages: list[tuple[int, str | None]] = [
        (n, f"{table}\n\n{filler}\n\n## Conditions\n\n{filler}\n\n{table}") for n in range(1, 5)
    ]

    splits = split_pages(pages, FurnitureMode.separate)

    assert all(split.furniture == [] for split in splits)
    assert [split.body for split in splits] == [markdown for _, markdown in pages]


def test_a_line_that_merely_repeats_once_in_a_long_document_stays() -> None:
    pages: list[tuple[int, str | None]] = [
        (n, f"Section {n} opens.\n\nIts text, {n}a.\n\nIts text, {n}b.\n\nSection {n} ends.")
        for n in range(1, 7)
    ]
    for n in (2, 5):  # on two pages of six: below the running share
        pages[n - 1] = (n, f"Thank you for your business.\n\n{pages[n - 1][1]}")

    splits = split_pages(pages, FurnitureMode.separate)

    assert all(split.furniture == [] for split in splits)
    assert [split.body for split in splits] == [markdown for _, markdown in pages]


def test_different_invoices_in_one_file_keep_their_own_headers() -> None:
    # Two invoices of two pages each: the numbers differ, so no header repeats another.
    pages: list[tuple[int, str | None]] = []
    for number, invoice in ((1, 41), (2, 41), (3, 42), (4, 42)):
        pages.append((number, f"Invoice {invoice}\n\nGoods delivered in lot {number * 3}."))

    splits = by_number(split_pages(pages, FurnitureMode.separate))

    assert "Invoice 41" in (splits[1].body or "") and "Invoice 42" in (splits[3].body or "")
    assert "Invoice 41" not in (splits[2].body or "")
    assert "Invoice 42" not in (splits[4].body or "")
    assert furniture_texts(splits[3]) == [("Invoice 42", "running", True)]


def test_consecutive_numbers_that_are_not_page_numbers_are_not_a_counter() -> None:
    # "Invoice 41" and "Invoice 42" on pages 1 and 2 go up with the page, but nothing
    # says they are page numbers: each is its own header and both stay.
    pages: list[tuple[int, str | None]] = [
        (1, "Invoice 41\n\nFirst invoice."),
        (2, "Invoice 42\n\nSecond invoice."),
    ]

    splits = by_number(split_pages(pages, FurnitureMode.separate))

    assert splits[1].body == pages[0][1] and splits[2].body == pages[1][1]


def test_running_footer_without_digits_and_a_page_counter_in_a_header() -> None:
    pages: list[tuple[int, str | None]] = []
    for n in range(1, 5):
        footer = "\n\n*Confidential - ACME Supplies Ltd*" if n != 1 else ""
        pages.append((n, f"Statement for March - page {n}\n\nBody {n}.{footer}"))

    splits = by_number(split_pages(pages, FurnitureMode.separate))

    assert furniture_texts(splits[1]) == [("Statement for March - page 1", "running", True)]
    assert furniture_texts(splits[2]) == [  # the footer's first occurrence is here
        ("Statement for March - page 2", "running", False),
        ("*Confidential - ACME Supplies Ltd*", "running", True),
    ]
    assert furniture_texts(splits[3]) == [
        ("Statement for March - page 3", "running", False),
        ("*Confidential - ACME Supplies Ltd*", "running", False),
    ]
    assert splits[3].body == "Body 3."
    assert {item.kind for split in splits.values() for item in split.furniture} == {
        FurnitureKind.running
    }


def test_document_assembly_applies_the_mode_and_marks_failed_pages() -> None:
    pages = invoice_pages(3)
    pages[1] = (2, None)

    separate = assemble_document(pages, FurnitureMode.separate)
    inline = assemble_document(pages, FurnitureMode.inline)

    assert separate.markdown.count(HEADER) == 1
    assert inline.markdown.count(HEADER) == 2
    assert "Page 3 of 3" in inline.markdown and "Page 3 of 3" not in separate.markdown
    assert "<!-- page 2 -->\n\n<!-- page failed: no output -->" in separate.markdown
    assert sorted(separate.furniture) == [1, 3]  # a failed page has no furniture to report
    assert separate.furniture[3] == [
        {"text": HEADER, "position": "top", "kind": "running", "in_document": False},
        {"text": "Page 3 of 3", "position": "bottom", "kind": "page_number", "in_document": False},
    ]
    assert "\n\n\n" not in separate.markdown


def test_a_paragraph_repeated_at_the_edge_of_pages_stays_in_the_body() -> None:
    paragraph = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 4
    bodies = ("Goods were delivered.", "Payment is due in 30 days.", "Thank you.")
    pages = [(number, f"{paragraph}\n\n{bodies[number - 1]}") for number in (1, 2, 3)]
    for split in split_pages(pages, FurnitureMode.separate):
        assert split.furniture == []
        assert split.body is not None and paragraph.strip() in split.body


# Text built from what the word split treats specially: spaces of several kinds, cell
# bars, <br> tags whole and in pieces, emphasis marks, <u> tags, punctuation.
_TRICKY_PIECES = st.sampled_from(
    [
        " ",
        "  ",
        "\t",
        "\u00a0",
        "|",
        "||",
        "<br>",
        "<br/>",
        "<br />",
        "<br",
        "/>",
        "<",
        ">",
        "*",
        "**",
        "_",
        "`",
        "~",
        "<u>",
        "</u>",
        "u>",
        ".",
        ",",
        "(",
        ")",
        "#",
        "-",
        "\u2013",
        "INV/2023/03/0008",
        "Total",
        "due",
        "42",
        "é",
        "ÉTÉ",
        "x",
    ]
)
_TRICKY_LINES = st.lists(_TRICKY_PIECES, max_size=12).map("".join)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(_TRICKY_LINES, min_size=1, max_size=6), min_size=1, max_size=4),
    st.data(),
)
def test_the_body_words_of_a_drop_are_the_words_of_each_body_line_alone(
    pages: list[list[str]], data: st.DataObject
) -> None:
    """What a drop compares a header against: the words of every line that is not
    furniture, each line read on its own, so no word is made of two lines' pieces."""
    texts = {number: "\n".join(lines) for number, lines in enumerate(pages, start=1)}
    keys = [
        (number, index)
        for number, lines in enumerate(pages, start=1)
        for index in range(len(lines))
    ]
    furniture_keys = set(data.draw(st.lists(st.sampled_from(keys), unique=True)))
    found = [_furniture_at(number, index) for number, index in furniture_keys]

    expected: set[str] = set()
    for number, index in keys:
        if (number, index) not in furniture_keys:
            line = re.sub(r"[*_`~]|</?u>", "", pages[number - 1][index]).lower()
            for word in re.split(r"\s+|\||<br\s*/?>", line):
                word = word.strip(".,:;!?()[]{}\"'#-\u2013\u2014")
                if word and any(char.isalnum() for char in word):
                    expected.add(word)
    assert _body_words(found, texts) == expected


def _furniture_at(number: int, index: int) -> _Found:
    line = _Line(number, index, text="", plain="", position="top", at_very_edge=True)
    return _Found(line, FurnitureKind.page_number)
