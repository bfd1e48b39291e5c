"""OCR lines to Markdown, on line boxes laid out as pages lay them out (no OCR run)."""

from __future__ import annotations

import re

from worker.engines.ocr_boxes import Box, Line, Word
from worker.engines.ocr_layout import page_markdown

LINE_HEIGHT = 24.0


def line(text: str, x0: float, y0: float, char_px: float = 10.0) -> Line:
    """A line box as the recogniser gives it, its words placed by character count."""
    words = []
    x = x0
    for word in text.split():
        words.append(Word(word, Box(x, y0, x + char_px * len(word), y0 + LINE_HEIGHT)))
        x += char_px * (len(word) + 1)
    return Line(text, Box(x0, y0, x0 + char_px * len(text), y0 + LINE_HEIGHT), tuple(words))


def column(texts: list[str], x0: float, y0: float) -> list[Line]:
    return [line(text, x0, y0 + 28.0 * index) for index, text in enumerate(texts)]


LEFT = [
    "the first column opens the story",
    "and carries on down the page to",
    "its very end in one line after",
    "another until the column stops",
]
RIGHT = [
    "then the second column picks up",
    "the thread where the first one",
    "left it and runs down the right",
    "half of the page to its foot",
]


def test_two_columns_read_one_after_the_other_with_nothing_glued() -> None:
    # Rows of both columns share baselines and a narrow gutter (12 px for 24 px lines).
    lines = [*column(LEFT, 100, 200), *column(RIGHT, 432, 200)]
    markdown = page_markdown(lines)
    assert markdown.split() == " ".join(LEFT + RIGHT).split()
    for left, right in zip(LEFT, RIGHT, strict=True):
        assert f"{left} {right}" not in markdown


def test_columns_stay_apart_when_paragraph_breaks_line_up_across_the_gutter() -> None:
    # A title over both columns, and a paragraph break at the same height in both.
    title = line("A title across the whole width", 100, 100)
    lines = [
        title,
        *column(LEFT[:2], 100, 200),
        *column(LEFT[2:], 100, 280),
        *column(RIGHT[:2], 432, 200),
        *column(RIGHT[2:], 432, 280),
    ]
    markdown = page_markdown(lines)
    assert markdown.split() == " ".join([title.text, *LEFT, *RIGHT]).split()


def test_labels_and_their_amounts_read_across_on_one_line() -> None:
    # Two rows: three or more would be a table of labels and amounts (test_ocr_tables).
    labels = ["Orange juice", "TOTAL:"]
    amounts = ["4.10", "9.80"]
    lines = [
        item
        for index, (label, amount) in enumerate(zip(labels, amounts, strict=True))
        for item in (line(label, 40, 100 + 30 * index), line(amount, 300, 100 + 30 * index))
    ]
    text_lines = page_markdown(lines).splitlines()
    for label, amount in zip(labels, amounts, strict=True):
        assert f"{label} {amount}" in text_lines


def test_rows_of_aligned_cells_become_a_markdown_table() -> None:
    rows = [
        ("Description", "Qty", "Price", "Amount"),
        ("Office chair", "1", "70.00", "70.00"),
        ("Desk lamp", "2", "15.00", "30.00"),
        ("Paper", "10", "4.50", "45.00"),
    ]
    xs = (40, 400, 520, 660)
    lines = [
        line(cell, x, 300 + 30 * r)
        for r, row in enumerate(rows)
        for cell, x in zip(row, xs, strict=True)
    ]
    lines.append(line("Thank you for your order.", 40, 500))
    markdown = page_markdown(lines)
    table = [row for row in markdown.splitlines() if row.startswith("|")]
    assert table[0] == "| Description | Qty | Price | Amount |"
    assert table[1] == "| --- | --- | --- | --- |"
    assert table[2:] == [f"| {' | '.join(row)} |" for row in rows[1:]]
    assert markdown.rstrip().endswith("Thank you for your order.")


def test_two_cells_read_as_one_line_are_split_at_the_column_their_words_stand_in() -> None:
    # The recogniser often reads two close cells ("0.00 15%") as one line; its word
    # boxes still stand in the two columns.
    lines = []
    for r, (name, qty, disc, tax) in enumerate(
        [
            ("Item", "Qty", "Disc.", "Tax"),
            ("Chair", "1", "0.00", "15%"),
            ("Lamp", "2", "5.00", "15%"),
        ]
    ):
        y = 300 + 30 * r
        first, second = line(disc, 500, y), line(tax, 580, y)
        merged = Line(
            f"{disc} {tax}",
            Box(first.box.x0, y, second.box.x1, y + LINE_HEIGHT),
            first.words + second.words,
        )
        lines += [line(name, 40, y), line(qty, 300, y), merged]
    markdown = page_markdown(lines)
    rows = [row for row in markdown.splitlines() if row.startswith("| ") and "---" not in row]
    assert rows == [
        "| Item | Qty | Disc. | Tax |",
        "| Chair | 1 | 0.00 | 15% |",
        "| Lamp | 2 | 5.00 | 15% |",
    ]


def test_three_text_columns_are_not_a_table() -> None:
    words = [
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
    ]
    texts = [" ".join(words[i : i + 6]) for i in range(0, 6)]
    lines = [*column(texts, 40, 100), *column(texts, 400, 100), *column(texts, 760, 100)]
    assert "|" not in page_markdown(lines)


def test_markup_the_recogniser_reads_is_text_and_never_html() -> None:
    lines = [line("<!-- not a comment --> a<br>b", 40, 100), line("# not a heading", 40, 128)]
    markdown = page_markdown(lines)
    # Escaped, so no Markdown renderer reads a comment or a tag.
    assert re.search(r"(?<!\\)<", markdown) is None
    assert markdown.replace("\\", "").split() == [
        "<!--",
        "not",
        "a",
        "comment",
        "-->",
        "a<br>b",
        "#",
        "not",
        "a",
        "heading",
    ]
    assert not markdown.splitlines()[-1].startswith("#")


def test_a_tall_line_on_its_own_is_a_heading() -> None:
    heading = Line(
        "Annual report", Box(40, 40, 400, 80), (Word("Annual report", Box(40, 40, 400, 80)),)
    )
    body = column(LEFT, 40, 120)
    assert page_markdown([heading, *body]).splitlines()[0] == "## Annual report"


def test_a_row_of_labels_over_a_row_of_values_is_not_a_table() -> None:
    labels = ("Invoice Date:", "Due Date:", "Reference:")
    values = ("03/20/2023", "04/04/2023", "CUSTREF123")
    xs = (40, 400, 760)
    lines = [line(text, x, 100) for text, x in zip(labels, xs, strict=True)]
    lines += [line(text, x, 130) for text, x in zip(values, xs, strict=True)]
    markdown = page_markdown(lines)
    assert "|" not in markdown
    assert markdown.split() == [word for text in (*labels, *values) for word in text.split()]


def test_rows_bridged_into_a_table_add_no_column() -> None:
    # A subtotal under the last two columns and a section label across the first.
    xs = (40, 400, 520, 660)
    rows = [("Item", "Qty", "Price", "Amount"), ("Chair", "1", "70.00", "70.00")]
    lines = [
        line(cell, x, 300 + 30 * r)
        for r, row in enumerate(rows)
        for cell, x in zip(row, xs, strict=True)
    ]
    lines.append(line("Subtotal 70.00", 575, 360))
    lines.append(line("--- Garden furniture ---", 40, 390))
    lines += [
        line(cell, x, 420) for cell, x in zip(("Bench", "2", "40.00", "80.00"), xs, strict=True)
    ]
    table = [row for row in page_markdown(lines).splitlines() if row.startswith("|")]
    assert all(row.count(" | ") == 3 for row in table)
    assert len(table) == 6


def test_fields_side_by_side_read_row_by_row() -> None:
    # Two fields only: no table, and no columns either.
    lines = [line("Invoice Date:", 40, 100), line("Reference:", 500, 100)]
    lines += [line("03/20/2023", 40, 130), line("CUSTREF123", 500, 130)]
    assert page_markdown(lines).split() == [
        "Invoice",
        "Date:",
        "Reference:",
        "03/20/2023",
        "CUSTREF123",
    ]


def test_a_description_cut_in_two_stays_in_its_column() -> None:
    xs = (40, 600, 700, 800)
    rows = [
        ("Article", "Qty", "VAT", "Price"),
        ("Leather cover", "1", "21%", "69.99"),
        ("Game console", "1", "21%", "189.00"),
        ("Power adapter", "1", "21%", "14.99"),
    ]
    lines = [
        line(cell, x, 300 + 30 * r)
        for r, row in enumerate(rows)
        for cell, x in zip(row, xs, strict=True)
    ]
    # The recogniser read one long description as two lines with a gap between them.
    lines += [line("Tablet Air Wifi 16 GB", 40, 420), line("Silver", 300, 420)]
    lines += [line(cell, x, 420) for cell, x in zip(("1", "21%", "399.00"), xs[1:], strict=True)]
    table = [row for row in page_markdown(lines).splitlines() if row.startswith("|")]
    assert table[-1] == "| Tablet Air Wifi 16 GB Silver | 1 | 21% | 399.00 |"
    assert all(row.count(" | ") == 3 for row in table)


def test_wrapped_prose_is_one_line_and_short_rows_keep_their_breaks() -> None:
    prose = [
        line("a paragraph the page wrapped at the", 40, 100),
        line("right edge of its column, every line", 40, 128),
        line("but the last one", 40, 156),
    ]
    items = [line("Coffee", 40, 260), line("Tea", 40, 288), line("Juice", 40, 316)]
    paragraphs = page_markdown([*prose, *items]).split("\n\n")
    assert paragraphs == [
        "a paragraph the page wrapped at the right edge of its column, every line but the last one",
        "Coffee\nTea\nJuice",
    ]
