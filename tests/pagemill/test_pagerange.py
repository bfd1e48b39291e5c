from __future__ import annotations

import pytest

from pagemill.documents.pagerange import PageRangeError, parse_page_selection


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
