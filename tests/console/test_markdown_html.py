"""A page's Markdown comes from a document anyone could have sent: shown as HTML in
the console, it must never run script, load anything, or link to a script."""

from __future__ import annotations

from api.console.charts import Bar, bar_chart
from api.console.render import markdown_html


def test_tables_headings_and_emphasis_render() -> None:
    html = markdown_html("# Invoice\n\n| Item | Amount |\n|---|--:|\n| Tea | **4.20** |\n")
    assert "<h1>Invoice</h1>" in html
    assert "<table>" in html and "<td>Tea</td>" in html
    assert '<td style="text-align:right"><strong>4.20</strong></td>' in html


def test_script_html_and_event_handlers_are_shown_as_text() -> None:
    html = markdown_html('<script>alert(1)</script>\n\n<img src=x onerror="alert(2)">\n')
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_links_keep_only_safe_schemes_and_images_load_nothing() -> None:
    html = markdown_html(
        "[pay](javascript:alert(1)) [site](https://example.com) ![x](https://tracker.example/p.gif)"
    )
    assert 'href="javascript' not in html and "<a href" in html
    assert 'href="https://example.com"' in html and 'rel="noopener noreferrer nofollow"' in html
    assert "tracker.example" not in html and "<img" not in html


def test_chart_labels_are_escaped_and_written_out() -> None:
    svg = bar_chart("Cost", [Bar("<b>acme</b>", 2, "$2"), Bar("globex", 1, "$1")])
    assert "&lt;b&gt;acme&lt;/b&gt;" in svg and "<b>" not in svg
    assert svg.count("<rect") == 2 and ">$1<" in svg
