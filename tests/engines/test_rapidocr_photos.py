"""rapidocr on a photographed receipt generated from text: lines in order, plain Markdown.

The receipt is laid out by `cli.evaluation.layouts`, its own text layer is the
reference, and the photo is `cli.evaluation.degrade.photograph` (perspective, light
falling off across the sheet, JPEG). The Markdown is scored against plain rapidocr
lines of the same image in the same run, so the layout pass can only add.
"""

from __future__ import annotations

import io
import re

import numpy as np
import pymupdf
from PIL import Image

from cli.evaluation.degrade import photograph
from cli.evaluation.layouts import receipt_page
from pagemill.quality.metrics import bag_of_words_error_rate
from worker.engines.base import PageFacts, PageInput
from worker.engines.ocr_layout import page_markdown
from worker.engines.rapidocr import RapidOcrEngine, read_lines

RECEIPT = """CORNER BAKERY
12 Market Street
Receipt 0042 2026-03-14 08:12
Sourdough loaf 4.80
Rye rolls x6 3.90
Cinnamon bun 2.75
Flat white 3.20
Orange juice 2.90
Subtotal 17.55
VAT 7% 1.15
TOTAL 18.70
Card payment 18.70
Thank you and see you soon
"""


def _photo_png(document: pymupdf.Document) -> bytes:
    pixmap = document[0].get_pixmap(dpi=150, colorspace=pymupdf.csGRAY, alpha=False)
    image = Image.frombytes("L", (pixmap.width, pixmap.height), pixmap.samples)
    buffer = io.BytesIO()
    photograph(image, np.random.default_rng(7)).save(buffer, format="PNG")
    return buffer.getvalue()


def test_photographed_receipt_reads_as_lines_in_order_with_no_html() -> None:
    document = receipt_page(RECEIPT)
    reference = document[0].get_text(sort=True)
    png = _photo_png(document)
    facts = PageFacts(1, 300.0, 600.0, 0, 0, 0, 1.0)
    markdown = RapidOcrEngine().convert(PageInput(facts, png, 150)).markdown

    assert "<!--" not in markdown and not re.search(r"<br\s*/?>", markdown)
    plain_lines = "\n".join(line.text for line in read_lines(png))
    assert bag_of_words_error_rate(markdown, reference) <= bag_of_words_error_rate(
        plain_lines, reference
    )
    assert bag_of_words_error_rate(markdown, reference) <= 0.1
    # Each amount on its label's line, the lines in the receipt's order.
    lines = markdown.splitlines()
    total = next(index for index, text in enumerate(lines) if "TOTAL" in text)
    assert "18.70" in lines[total]
    subtotal = next(index for index, text in enumerate(lines) if "Subtotal" in text)
    assert "17.55" in lines[subtotal] and subtotal < total


def test_layout_pass_keeps_every_word_the_recogniser_read() -> None:
    png = _photo_png(receipt_page(RECEIPT))
    lines = read_lines(png)
    # The items and their amounts may come as a table: its borders are not words.
    markdown_words = [
        token
        for token in page_markdown(lines).split()
        if token != "|" and not re.fullmatch(r"-{3,}", token)
    ]
    assert sorted(markdown_words) == sorted(word for line in lines for word in line.text.split())
