"""The text layer's counts the router reads (pagemill.documents.facts.trace_text)."""

from __future__ import annotations

from collections import Counter

import pymupdf

from pagemill.documents.facts import trace_text


def test_trace_counts_characters_by_visibility_direction_and_readability() -> None:
    document = pymupdf.open()
    page = document.new_page(width=595, height=842)
    page.insert_text((72, 100), "two words", fontsize=11)  # 8 drawn, the space not counted
    page.insert_text((72, 400), "up the page", fontsize=11, rotate=90)  # 9, running up
    page.insert_text((72, 500), "hidden  layer", fontsize=11, render_mode=3)  # 11 invisible
    # A glyph the text layer maps to U+FFFD, as broken fonts do: drawn, and unreadable.
    page.insert_font(fontname="F0", fontbuffer=pymupdf.Font("cjk").buffer)
    page.insert_text((72, 600), "a\ufffdb", fontsize=11, fontname="F0")
    reopened = pymupdf.open("pdf", document.tobytes())

    trace = trace_text(reopened[0])

    assert trace.visible_chars == 8 + 9 + 3
    assert trace.invisible_chars == 11
    assert trace.unreadable_chars == 1
    assert trace.visible_by_direction == Counter({0: 8 + 3, 270: 9})
