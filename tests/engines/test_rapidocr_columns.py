"""Reading order on a scanned two-column page: one column after the other, nothing glued.

The page is laid out from text by `cli.evaluation.layouts` (its own text layer is the
reference) and rendered at the OCR engine's resolution, as a clean scan. The same text
laid out in one column is the yardstick for what OCR alone loses.
"""

from __future__ import annotations

import pymupdf
import pytest

from cli.evaluation.layouts import (
    A4_HEIGHT_PT,
    A4_WIDTH_PT,
    single_column_page,
    two_column_page,
)
from pagemill.quality.metrics import (
    bag_of_words_error_rate,
    character_error_rate,
    normalise_text,
    words,
)
from worker.engines.base import PageFacts, PageInput
from worker.engines.rapidocr import RapidOcrEngine

PROSE = """The harbour town grew around a single stone quay, built by merchants who traded
salt and timber along the northern coast. For two centuries the quay was the only place
where larger ships could unload, and the warehouses behind it were rebuilt three times
after fires that started in the drying sheds.

By the middle of the last century the fishing fleet had shrunk to a handful of boats.
The council bought the empty warehouses and turned the largest into a market hall,
which still opens every Saturday morning. Farmers bring cheese, apples and honey from
the valleys, and the fishmongers set up their tables along the eastern wall.

Visitors often ask why the streets run at such odd angles. The answer lies in the old
drainage ditches, which followed the slope of the hill down to the water. When the
ditches were covered, the lanes kept their crooked lines, and the houses were built
wherever the ground was firm enough to carry a cellar.

The lighthouse at the end of the breakwater was automated long ago, but the keeper's
cottage has been kept as a small museum. It shows charts, lamps and logbooks, and a
model of the steamer that ran aground on the sandbank during the winter storm that
older residents still talk about.

A walking route starts at the market hall, climbs past the church and the old school,
and returns along the cliff path, where benches look out over the bay. The whole loop
takes about two hours at an easy pace, and the view from the top is best in the late
afternoon, when the light falls across the rooftops and the water below.

In recent years a small boatyard has reopened beside the slipway. Its apprentices
repair wooden dinghies and build one new boat each winter, which is launched with some
ceremony in the spring. The yard welcomes visitors on weekdays, and the workers are
happy to explain how the planks are steamed and bent into shape.
"""
# Measured: 0.0 on both layouts of this text at 150 dpi; the 1.3x target of the issue,
# with a floor for one misread word in either layout.
RATIO_MAX = 1.3
ONE_COLUMN_MAX = 0.02
# Measured: 0.00x; misread characters only, none out of order.
CER_MAX = 0.03
FLOOR = 0.01


def _ocr(document: pymupdf.Document) -> str:
    pixmap = document[0].get_pixmap(dpi=150, colorspace=pymupdf.csGRAY, alpha=False)
    facts = PageFacts(1, A4_WIDTH_PT, A4_HEIGHT_PT, 0, 0, 0, 1.0)
    return RapidOcrEngine().convert(PageInput(facts, pixmap.tobytes("png"), 150)).markdown


@pytest.fixture(scope="module")
def two_columns() -> tuple[str, str]:
    document = two_column_page(PROSE)
    return _ocr(document), document[0].get_text()


def test_two_columns_read_in_order(two_columns: tuple[str, str]) -> None:
    markdown, reference = two_columns
    # The reference is the left column, then the right: character error counts order, and
    # a reading that alternates between the columns line by line scores above 0.5.
    assert character_error_rate(markdown, reference) <= CER_MAX


def test_no_words_glued_across_the_gutter(two_columns: tuple[str, str]) -> None:
    markdown, reference = two_columns
    vocabulary = {word.lower() for word in words(normalise_text(reference))}
    glued = [
        word
        for word in words(normalise_text(markdown))
        if word.lower() not in vocabulary
        and any(
            word.lower()[:cut] in vocabulary and word.lower()[cut:] in vocabulary
            for cut in range(2, len(word) - 1)
        )
    ]
    assert glued == []


def test_two_columns_lose_no_more_words_than_one(two_columns: tuple[str, str]) -> None:
    markdown, reference = two_columns
    single = single_column_page(PROSE)
    two_error = bag_of_words_error_rate(markdown, reference)
    one_error = bag_of_words_error_rate(_ocr(single), single[0].get_text())
    assert two_error <= max(RATIO_MAX * one_error, FLOOR)
    # Measured 0.000; 0.114 when rapidocr's line classifier turned clean lines over.
    assert one_error <= ONE_COLUMN_MAX
