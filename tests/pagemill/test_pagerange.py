from __future__ import annotations

import pytest

from pagemill.documents.pagerange import (
    PageRangeError,
    canonical_page_selection,
    parse_page_selection,
)


@pytest.mark.parametrize(
    ("selection", "expected"),
    [
        (None, [1, 2, 3, 4, 5]),
        ("", [1, 2, 3, 4, 5]),
        ("1-3,7", None),
        ("2", [2]),
        ("1-3,5", [1, 2, 3, 5]),
        (" 4 - 5 , 1 ", [1, 4, 5]),
        ("3,1,3,2-3", [1, 2, 3]),
    ],
)
def test_valid_selections(selection: str | None, expected: list[int] | None) -> None:
    if expected is None:
        with pytest.raises(PageRangeError, match="outside the document, which has 5 pages"):
            parse_page_selection(selection, 5)
    else:
        assert parse_page_selection(selection, 5) == expected


@pytest.mark.parametrize("selection", ["0", "3-1", "a", "1-", "-2", "1,,2", "1-2-3"])
def test_invalid_selections(selection: str) -> None:
    with pytest.raises(PageRangeError):
        parse_page_selection(selection, 5)


@pytest.mark.parametrize(
    "selection",
    ["9" * 5000, "1-" + "9" * 5000, "1234567890", ",".join(["1"] * 150), "\u0661", "1\x002"],
)
def test_huge_long_or_odd_selections_are_refused_plainly(selection: str) -> None:
    with pytest.raises(PageRangeError) as refused:
        parse_page_selection(selection, 5)
    assert len(str(refused.value)) < 200
    with pytest.raises(PageRangeError):
        canonical_page_selection(selection)


@pytest.mark.parametrize(
    ("selection", "canonical"),
    [
        (None, None),
        ("  ", None),
        ("1-2", "1-2"),
        (" 1 - 2 ", "1-2"),
        ("2,1", "1-2"),
        ("3,1-2,7,8-9,5", "1-3,5,7-9"),
        ("4-6,5", "4-6"),
        ("1-999999", "1-999999"),
    ],
)
def test_canonical_selection_names_the_same_pages_one_way(
    selection: str | None, canonical: str | None
) -> None:
    assert canonical_page_selection(selection) == canonical
