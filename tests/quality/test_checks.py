"""Each page check on crafted Markdown that must pass and Markdown that must fail."""

from __future__ import annotations

import pytest

from pagemill.quality.checks import (
    CheckName,
    CheckResult,
    check_blank_invented,
    check_empty_output,
    check_latex,
    check_repetition,
    check_tables,
    check_truncation,
    find_tables,
    run_checks,
    split_row,
)

# A real page: pymupdf4llm's Markdown for the corpus invoice AzureInterior.pdf, trimmed.
INVOICE_PAGE = """\
# Invoice INV/2023/03/0008

**Invoice Date: Due Date:** 03/20/2023 04/04/2023

|**Description**|**Quantity**|**Unit Price**|**Disc.% **|**Taxes**|**Amount**|
|---|---|---|---|---|---|
|**--- Non Food ---**||||||
|[17589684] Beeswax XL|1.00 kg|42.00|0.00|15.00%|$ 42.00|
|[FURN_7777] Office Chair|1.00 Units|70.00|0.00|15.00%|$ 70.00|
||||||**Subtotal**$ 112.00|
|||Tax 15% on $ 112|.90||$ 16.94|
|||**Total**|||$ 279.84|

Payment terms: 15 Days. Total due: $279.84, tax $16.94.
"""


def assert_consistent(result: CheckResult) -> None:
    assert 0.0 <= result.score <= 1.0
    assert (result.score == 1.0) == result.passed


def test_a_real_invoice_page_passes_every_check() -> None:
    results = run_checks(INVOICE_PAGE, finish_reason="stop", page_is_blank=False)
    assert [r.name for r in results] == list(CheckName)
    for result in results:
        assert_consistent(result)
        assert result.passed, result


def test_names_are_stable_strings() -> None:
    # Stored in page rows and manifest.json: renaming one breaks what readers parse.
    assert [str(name) for name in CheckName] == [
        "repetition",
        "tables",
        "latex",
        "truncation",
        "empty_output",
        "blank_invented",
    ]
    assert check_tables("").to_dict() == {
        "name": "tables",
        "passed": True,
        "score": 1.0,
        "detail": "0 table(s) well formed",
    }


def test_run_checks_skips_the_ink_checks_when_blankness_is_unknown() -> None:
    names = {r.name for r in run_checks("text")}
    assert CheckName.EMPTY_OUTPUT not in names
    assert CheckName.BLANK_INVENTED not in names


# --- repetition ---------------------------------------------------------------------------

LOOP_LINE = "The total amount is payable within thirty days.\n"


def test_repetition_catches_a_runaway_loop_and_scores_its_share() -> None:
    markdown = "# Terms\n\nSome opening text of the page.\n\n" + LOOP_LINE * 60
    result = check_repetition(markdown)
    assert_consistent(result)
    assert not result.passed
    assert "repeated 60 times" in result.detail
    # 9 tokens before the loop ("#", "Terms", "Some" ... "page", ".") and 60 copies of a
    # 9-token line: 59 copies are redundant.
    assert result.score == pytest.approx(1 - 59 * 9 / (9 + 60 * 9))


def test_repetition_catches_a_single_word_stutter() -> None:
    result = check_repetition("Price " + "the " * 80)
    assert not result.passed
    assert result.score < 0.05


def test_repetition_finds_a_loop_behind_a_longer_but_rarer_repeat() -> None:
    # A 30-token paragraph quoted 3 times (60 redundant tokens) and a 5-token line looped 12
    # times (55 redundant): only the second is a loop.
    paragraph = " ".join(f"word{i}" for i in range(30)) + "\n"
    result = check_repetition(paragraph * 3 + "Total due now: 0.00\n" * 12)
    assert not result.passed
    assert "5-token unit repeated 12 times" in result.detail


def test_repetition_catches_a_loop_cut_off_mid_unit_at_the_token_cap() -> None:
    looped = "| Item | 0.00 |\n" * 40 + "| Item | 0."
    assert not check_repetition("Intro.\n\n" + looped).passed


@pytest.mark.parametrize(
    "markdown",
    [
        pytest.param(LOOP_LINE * 7, id="seven copies are under the repeat bound"),
        pytest.param("| 0 " * 20 + "|", id="a row of twenty zero cells"),
        pytest.param("| | | | |\n" * 40, id="an empty form table: markup only"),
        pytest.param("Contents " + "." * 300 + " 5", id="a dotted leader"),
        pytest.param("yes no " * 6, id="short repeats"),
        pytest.param("", id="empty"),
    ],
)
def test_repetition_lets_legitimate_repeats_pass(markdown: str) -> None:
    result = check_repetition(markdown)
    assert_consistent(result)
    assert result.passed, result.detail


# --- tables -------------------------------------------------------------------------------


def test_tables_pass_when_well_formed_including_escaped_pipes_and_code() -> None:
    markdown = (
        "| a | b |\n|:--|--:|\n| 1 | x \\| y |\n| `p|q` | 2 |\n\ntext\n\n| c |\n| --- |\n| 3 |\n"
    )
    result = check_tables(markdown)
    assert_consistent(result)
    assert result.passed
    assert result.detail == "2 table(s) well formed"


def test_tables_fail_on_a_missing_header_separator() -> None:
    result = check_tables("| a | b |\n| 1 | 2 |\n")
    assert not result.passed
    assert "no header separator" in result.detail
    assert result.score == 0.0


def test_tables_fail_on_a_ragged_row_and_score_the_share_well_formed() -> None:
    good = "| a | b |\n|---|---|\n| 1 | 2 |\n"
    ragged = "| a | b |\n|---|---|\n| 1 | 2 | 3 |\n"
    result = check_tables(good + "\nbetween\n\n" + ragged)
    assert_consistent(result)
    assert not result.passed
    assert "table 2 (line 7): row 3 has 3 cells, the header has 2" in result.detail
    assert result.score == pytest.approx(0.5)


def test_tables_fail_on_a_separator_with_the_wrong_width() -> None:
    result = check_tables("| a | b | c |\n|---|---|\n| 1 | 2 | 3 |\n")
    assert not result.passed
    assert "row 2 has 2 cells" in result.detail


def test_tables_ignore_pipes_in_fenced_code() -> None:
    assert check_tables("```\n| not | a table\n```\n").passed


def test_tables_fail_on_an_unclosed_html_table() -> None:
    result = check_tables("<table><tr><td>1</td></tr>")
    assert not result.passed
    assert "<table>" in result.detail
    assert check_tables("<table><tr><th>a</th></tr><tr><td>1</td></tr></table>").passed


def test_split_row_and_find_tables() -> None:
    assert split_row("| a | b \\| c | `x|y` |") == ["a", "b | c", "`x|y`"]
    assert split_row("|a||c|") == ["a", "", "c"]
    tables = find_tables("intro\n| h |\n|---|\n| 1 |\nafter\n")
    assert len(tables) == 1
    assert tables[0].first_line == 2
    assert tables[0].rows == [["h"], ["---"], ["1"]]


# --- LaTeX --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "markdown",
    [
        pytest.param("Energy $E = mc^2$ and $$\\int_0^1 x\\,dx = \\frac{1}{2}$$.", id="dollars"),
        pytest.param("Inline \\(a+b\\) and display\n\\[\n\\sum_i x_i\n\\]\n", id="brackets"),
        pytest.param("$$\n\\begin{array}{c} a \\\\[2pt] b \\end{array}\n$$", id="row spacing"),
        pytest.param("Pay $5 and $10, or $ 1,939.00 in total.", id="currency"),
        pytest.param("Escaped \\$x and code `$x` and\n```\n$ ls\n```\n", id="escaped and code"),
        pytest.param("No maths here.", id="none"),
    ],
)
def test_latex_passes_balanced_delimiters(markdown: str) -> None:
    result = check_latex(markdown)
    assert_consistent(result)
    assert result.passed, result.detail


@pytest.mark.parametrize(
    ("markdown", "message"),
    [
        pytest.param("Where $x^2 + y^2 = z^2 holds.", "$ at offset 6 is never closed", id="$"),
        pytest.param("$$\\int_0^1 f(x)\\,dx", "$$ at offset 0 is never closed", id="$$"),
        pytest.param("\\[ a + b", "\\[ at offset 0 is never closed", id="\\["),
        pytest.param(
            "\\(a\n\nb\\)", "\\( at offset 0 is never closed", id="\\( across a paragraph"
        ),
        pytest.param("a + b\\]", "\\] without an opener", id="stray \\]"),
    ],
)
def test_latex_fails_unbalanced_delimiters(markdown: str, message: str) -> None:
    result = check_latex(markdown)
    assert_consistent(result)
    assert not result.passed
    assert message in result.detail


def test_latex_scores_the_share_of_formulas_closed() -> None:
    result = check_latex("$a$ and $b$ and $c$ but $d + e")
    # Three pairs closed, one opener never closed.
    assert result.score == pytest.approx(3 / 4)


# --- truncation, empty and invented output ------------------------------------------------


def test_truncation_fails_on_length_or_at_the_token_cap() -> None:
    assert not check_truncation("length", None, None).passed
    at_cap = check_truncation("stop", 4096, 4096)
    assert not at_cap.passed
    assert at_cap.score == 0.0
    assert "reached the cap of 4096" in at_cap.detail


def test_truncation_passes_a_page_that_stopped_by_itself() -> None:
    assert check_truncation("stop", 4095, 4096).passed
    # The CPU engines count no tokens: nothing to hold against them.
    assert check_truncation(None, None, None).passed


def test_empty_output_fails_only_for_a_page_with_ink() -> None:
    assert not check_empty_output(" \n\n ", page_is_blank=False).passed
    assert check_empty_output("", page_is_blank=True).passed
    assert check_empty_output("Text", page_is_blank=False).passed


def test_blank_invented_fails_any_text_from_a_blank_page() -> None:
    result = check_blank_invented("Lorem ipsum.", page_is_blank=True)
    assert not result.passed
    assert result.score == 0.0
    assert check_blank_invented("\n", page_is_blank=True).passed
    assert check_blank_invented("Lorem ipsum.", page_is_blank=False).passed
