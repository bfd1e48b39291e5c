"""Invoice tables on scans, on line boxes laid out as invoices lay them out (no OCR run).

Word boxes here stand as the recogniser places them at 150 dpi: 24 px lines, 10 px a
character, 6 px between the words of one cell.
"""

from __future__ import annotations

import re

from worker.engines.ocr_boxes import Box, Line, Word
from worker.engines.ocr_layout import page_markdown

LINE_HEIGHT = 24.0
CHAR_PX = 10.0
SPACE_PX = 6.0
SEPARATOR = re.compile(r"^\|( --- \|)+$")


def line(text: str, x0: float, y0: float) -> Line:
    words = []
    x = x0
    for word in text.split():
        words.append(Word(word, Box(x, y0, x + CHAR_PX * len(word), y0 + LINE_HEIGHT)))
        x += CHAR_PX * len(word) + SPACE_PX
    return Line(text, Box(x0, y0, words[-1].box.x1, y0 + LINE_HEIGHT), tuple(words))


def flush_right(text: str, x1: float, y0: float) -> Line:
    """A cell set flush right, ending at x1 (amounts)."""
    width = CHAR_PX * len(text.replace(" ", "")) + SPACE_PX * text.count(" ")
    return line(text, x1 - width, y0)


def tables(markdown: str) -> list[list[str]]:
    """Each Markdown table's rows, separator rows left out."""
    found: list[list[str]] = []
    previous_was_table = False
    for row in markdown.splitlines():
        is_table = row.startswith("|")
        if is_table and not previous_was_table:
            found.append([])
        if is_table and not SEPARATOR.match(row):
            found[-1].append(row)
        previous_was_table = is_table
    return found


def test_section_labels_subtotals_and_wrapped_lines_are_rows_in_the_columns() -> None:
    xs = (40, 500, 620)
    lines = [line(text, x, 300) for text, x in zip(("Item", "Qty", "Amount"), xs, strict=True)]
    lines.append(line("--- Garden ---", 40, 328))
    lines += [line(text, x, 356) for text, x in zip(("Bench", "2", "80.00"), xs, strict=True)]
    # A description wrapped onto a second line is a row, as the born-digital table has it.
    lines.append(line("oak, seats three", 40, 380))
    lines.append(line("Subtotal 80.00", 540, 408))
    lines += [line(text, x, 436) for text, x in zip(("Kettle", "1", "25.00"), xs, strict=True)]
    [table] = tables(page_markdown(lines))
    assert table == [
        "| Item | Qty | Amount |",
        "| --- Garden --- |  |  |",
        "| Bench | 2 | 80.00 |",
        "| oak, seats three |  |  |",
        "|  |  | Subtotal 80.00 |",
        "| Kettle | 1 | 25.00 |",
    ]


def test_rows_spaced_apart_start_and_end_alike_are_one_table() -> None:
    # A hotel receipt: ruled rows two line heights apart, rates written out in words.
    rows = [
        ("DESCRIPTION", "RATE", "AMOUNT"),
        ("Room Charges", "Rs 1939 x 1 Night x 1 Room", "Rs 1939"),
        ("Grand Total", None, "Rs 1939"),
        ("Payment received by OYO", "Paid through Cash At Hotel (Rs 1939)", "Rs 1939"),
        # The last row fills two cells only: it is the table's all the same.
        ("Balance ( if any )", None, "Rs 0"),
    ]
    lines = []
    for index, (label, rate, amount) in enumerate(rows):
        y = 400 + 78 * index
        lines += [line(label, 100, y), flush_right(amount, 1110, y)]
        if rate is not None:
            lines.append(flush_right(rate, 980, y))
    [table] = tables(page_markdown(lines))
    assert table == [
        "| DESCRIPTION | RATE | AMOUNT |",
        "| Room Charges | Rs 1939 x 1 Night x 1 Room | Rs 1939 |",
        "| Grand Total |  | Rs 1939 |",
        "| Payment received by OYO | Paid through Cash At Hotel (Rs 1939) | Rs 1939 |",
        "| Balance ( if any ) |  | Rs 0 |",
    ]


def test_header_fields_over_the_line_items_are_two_tables() -> None:
    fields = [("Customer", 40), ("Order", 260), ("Date", 660), ("Invoice", 860), ("Due", 1060)]
    values = [("C0303", 40), ("SO0444", 260), ("8-9-2022", 660), ("VF1005", 860), ("22-9", 1060)]
    lines = [line(text, x, 100) for text, x in fields]
    lines += [line(text, x, 128) for text, x in values]
    # The line items two line heights below, within the same outer edges.
    items = [
        ("Article", "Description", "Price", "VAT", "Amount"),
        ("E103184", "Service kit", "49,99", "21 %", "49,99"),
        ("E103560", "Flyer", "0,00", "21 %", "0,00"),
    ]
    for index, row in enumerate(items):
        lines += [
            line(text, x, 200 + 28 * index)
            for text, x in zip(row, (40, 160, 820, 920, 1030), strict=True)
        ]
    found = tables(page_markdown(lines))
    assert [len(table) for table in found] == [2, 3]
    assert found[1][0] == "| Article | Description | Price | VAT | Amount |"


def test_a_label_running_across_columns_neither_closes_them_nor_splits() -> None:
    xs = (40, 160, 820, 920, 1030)
    items = [
        ("Article", "Description", "Price", "VAT", "Amount"),
        ("E103184", "Service kit", "49,99", "21 %", "49,99"),
        ("E103560", "Flyer", "0,00", "21 %", "0,00"),
    ]
    lines = [
        line(text, x, 200 + 28 * index)
        for index, row in enumerate(items)
        for text, x in zip(row, xs, strict=True)
    ]
    # A note across the first two columns, and a total's label across Price and VAT.
    lines += [line("Prices include VAT", 40, 300), line("Invoice total EUR", 800, 300)]
    lines.append(line("49,99", 1030, 300))
    [table] = tables(page_markdown(lines))
    assert table[0] == "| Article | Description | Price | VAT | Amount |"
    assert table[-1] == "| Prices include VAT |  | Invoice total EUR |  | 49,99 |"


def test_line_items_right_under_address_blocks_side_by_side_are_a_table_of_their_own() -> None:
    blocks = [
        ("Order ID: OD3041", "Billing Address", "Shipping Address"),
        ("Order Date: 15-10", "3/64, Gomti Nagar", "3/64, Gomti Nagar"),
        ("VAT/TIN: 2967086", "Lucknow 226010", "Lucknow 226010"),
    ]
    lines = [
        line(text, x, 100 + 26 * index)
        for index, row in enumerate(blocks)
        for text, x in zip(row, (20, 350, 680), strict=True)
    ]
    items = [
        ("Product", "Title", "Qty", "Price", "Tax", "Total"),
        ("Memory cards", "SanDisk Ultra", "1", "278.61", "40.39", "319.00"),
    ]
    for index, row in enumerate(items):
        lines += [
            line(text, x, 196 + 30 * index)
            for text, x in zip(row, (20, 240, 720, 800, 920, 1040), strict=True)
        ]
    found = tables(page_markdown(lines))
    assert [len(table) for table in found] == [3, 2]
    assert found[1][0] == "| Product | Title | Qty | Price | Tax | Total |"


def test_a_run_of_labels_with_amounts_flush_right_is_a_two_column_table() -> None:
    # A statement's detail list: services and their charges indented under them, the
    # amounts flush right at the far edge, then a lone total well below.
    items = [
        ("Data Transfer", 64, "$0.01"),
        ("Charges", 84, "$0.01"),
        ("VAT **", 84, "$0.00"),
        ("Elastic Compute Cloud", 64, "$12.87"),
        ("Charges", 84, "$12.87"),
    ]
    lines = [line("Detail", 40, 260)]
    for index, (label, x, amount) in enumerate(items):
        y = 300 + 32 * index
        lines += [line(label, x, y), flush_right(amount, 1160, y)]
    lines += [line("TOTAL", 40, 560), flush_right("12.88", 1160, 560)]
    markdown = page_markdown(lines)
    [table] = tables(markdown)
    assert table == [
        f"| {label.replace('*', chr(92) + '*')} | {amount} |" for label, _, amount in items
    ]
    assert "TOTAL 12.88" in markdown.splitlines()


def test_two_rows_or_ragged_figures_beside_text_are_no_table() -> None:
    # An address and its postcode over two lines; address blocks side by side whose
    # right-hand lines hold figures but end where their text ends.
    lines = [line("Fremont CA", 40, 100), flush_right("94538", 600, 100)]
    lines += [line("Scranton PA", 40, 128), flush_right("18503", 600, 128)]
    blocks = [
        ("Pino Bluebird", "Weena 664"),
        ("Sessamestreet 32", "3012 CN Rotterdam"),
        ("1025 RX Amsterdam", "KvK 24330087"),
    ]
    for index, (left, right) in enumerate(blocks):
        lines += [line(left, 40, 260 + 28 * index), line(right, 600, 260 + 28 * index)]
    markdown = page_markdown(lines)
    assert "|" not in markdown
    assert "Fremont CA 94538" in markdown.splitlines()


def test_a_photo_whose_tilt_changes_down_the_page_keeps_each_row_together() -> None:
    # Perspective: lines near the top tilt by 0.031, near the foot by 0.001, so a tilt
    # taken for the whole page (their median) leaves a row's far end 12 px off its start.
    def tilt(y: float) -> float:
        return -0.035 + 0.00002 * y

    def photographed(text: str, x0: float, y0: float) -> Line:
        flat = line(text, x0, y0)
        slope = tilt(y0)

        def moved(box: Box) -> Box:
            top, bottom = y0 + slope * box.x0, y0 + slope * box.x1
            return Box(box.x0, min(top, bottom), box.x1, max(top, bottom) + LINE_HEIGHT)

        words = tuple(Word(word.text, moved(word.box)) for word in flat.words)
        return Line(text, moved(flat.box), words, slope)

    rows = [("Item", "Qty", "Amount"), ("Bench", "2", "80.00"), ("Kettle", "1", "25.00")]
    lines = [
        photographed(text, x, 200 + 30 * index)
        for index, row in enumerate(rows)
        for text, x in zip(row, (40, 700, 1000), strict=True)
    ]
    prose = "a line of running text across the page that tells its tilt"
    lines += [photographed(prose, 40, 400 + 130 * index) for index in range(11)]
    [table] = tables(page_markdown(lines))
    assert table == ["| Item | Qty | Amount |", "| Bench | 2 | 80.00 |", "| Kettle | 1 | 25.00 |"]
