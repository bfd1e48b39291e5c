"""Bar charts as SVG, drawn on the server: no chart library, and every bar carries its
label and value as text, so nothing is told by colour alone."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from xml.sax.saxutils import escape

ROW_HEIGHT_PX = 26
LABEL_WIDTH_PX = 260
BAR_WIDTH_PX = 420
VALUE_WIDTH_PX = 140


@dataclass(frozen=True)
class Bar:
    label: str
    value: Decimal
    shown: str  # the value as text beside the bar


def bar_chart(title: str, bars: list[Bar]) -> str:
    """A horizontal bar chart, one row per bar, scaled to the largest value."""
    width = LABEL_WIDTH_PX + BAR_WIDTH_PX + VALUE_WIDTH_PX
    height = max(1, len(bars)) * ROW_HEIGHT_PX + 8
    largest = max((bar.value for bar in bars), default=Decimal(0))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'viewBox="0 0 {width} {height}" aria-label="{escape(title, {chr(34): "&quot;"})}">',
        f"<title>{escape(title)}</title>",
    ]
    if not bars:
        parts.append(f'<text x="4" y="{ROW_HEIGHT_PX - 8}">No data yet.</text>')
    for index, bar in enumerate(bars):
        top = index * ROW_HEIGHT_PX + 4
        length = 0 if largest <= 0 else int(BAR_WIDTH_PX * bar.value / largest)
        baseline = top + ROW_HEIGHT_PX - 10
        parts.append(
            f'<g><text x="{LABEL_WIDTH_PX - 8}" y="{baseline}" text-anchor="end">'
            f"{escape(bar.label)}</text>"
            f'<rect x="{LABEL_WIDTH_PX}" y="{top + 2}" width="{max(length, 1)}" '
            f'height="{ROW_HEIGHT_PX - 8}" class="bar"/>'
            f'<text x="{LABEL_WIDTH_PX + max(length, 1) + 6}" y="{baseline}">'
            f"{escape(bar.shown)}</text></g>"
        )
    parts.append("</svg>")
    return "".join(parts)
