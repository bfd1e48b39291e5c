"""Templates, and Markdown as safe HTML."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import nh3
from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from markdown_it import MarkdownIt

HERE = Path(__file__).parent
NOTHING = "\u2013"  # an en dash where there is no value
templates = Jinja2Templates(directory=HERE / "templates")

# Raw HTML in a page's Markdown is shown as text, never run; the sanitiser then keeps
# only the tags Markdown makes. No <img>: an image in a page's Markdown would make the
# operator's browser fetch whatever address the document named.
_markdown = MarkdownIt("commonmark", {"html": False}).enable("table")
_ALLOWED_TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "code", "pre",
    "blockquote", "ul", "ol", "li", "table", "thead", "tbody", "tr", "th", "td", "a", "del",
}  # fmt: skip


def markdown_html(text: str) -> str:
    """A page's Markdown as HTML that is safe to put in the console."""
    return nh3.clean(
        _markdown.render(text),
        tags=_ALLOWED_TAGS,
        attributes={"a": {"href", "title"}, "th": {"style"}, "td": {"style"}},
        url_schemes={"http", "https", "mailto"},
        filter_style_properties={"text-align"},
        link_rel="noopener noreferrer nofollow",
    )


def money(value: Any) -> str:
    if value is None or value == "":
        return NOTHING
    return f"${Decimal(str(value)):.6f}"


def number(value: Any, places: int = 2) -> str:
    if value is None or value == "":
        return NOTHING
    return f"{float(value):,.{places}f}"


templates.env.filters["money"] = money
templates.env.filters["number"] = number


# Only this origin's script, styles and images, and no framing: a console page inside
# another site's frame could be clicked through (the cancel button) unseen. Style
# attributes stay allowed for the alignment of Markdown table columns.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "style-src-attr 'unsafe-inline'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    # Pages show clients' documents and data: no shared cache keeps them.
    "Cache-Control": "no-store",
}


def render(
    request: Request, name: str, context: dict[str, Any], status_code: int = 200
) -> HTMLResponse:
    response = templates.TemplateResponse(request, name, context, status_code=status_code)
    response.headers.update(SECURITY_HEADERS)
    return response
