"""Markdown from the model → a Matrix message: the markdown as ``body`` (what plain clients
show) and HTML as ``formatted_body`` (``org.matrix.custom.html``), with no way to mention
anyone (``m.mentions`` is empty on every message we send, and nothing in the HTML pings).

Raw HTML in the answer is escaped, images are not rendered (an image URL would make clients
fetch it), links keep only http(s) and mailto targets. Long answers are split on the
markdown (code fences kept balanced per part) at :data:`MAX_MESSAGE` characters: Matrix
events may hold 64 KiB, and a part must still fit once turned into HTML.
"""

from __future__ import annotations

from typing import Any

from markdown_it import MarkdownIt

from channels._text import split_message

MAX_MESSAGE = 16_000
ALLOWED_SCHEMES = ("http://", "https://", "mailto:")
HTML = "org.matrix.custom.html"


def _build() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "breaks": True})
    md.enable("table").enable("strikethrough").disable(["image", "html_block", "html_inline"])
    md.validateLink = lambda url: url.strip().lower().startswith(ALLOWED_SCHEMES)  # type: ignore[method-assign]
    return md


_MD = _build()


def parts(markdown: str) -> list[str]:
    """The markdown of each message an answer takes; deterministic."""
    return split_message(markdown, MAX_MESSAGE)


def content(markdown: str, *, msgtype: str = "m.text", formatted: bool = True) -> dict[str, Any]:
    """The event content of one part (``formatted=False``: a draft, shown as written)."""
    body: dict[str, Any] = {"msgtype": msgtype, "body": markdown, "m.mentions": {}}
    if formatted:
        body["format"] = HTML
        body["formatted_body"] = str(_MD.render(markdown)).strip()
    return body
