"""Markdown from the model → a Matrix message: the markdown as ``body`` (what plain clients
show) and HTML as ``formatted_body`` (``org.matrix.custom.html``), with no way to mention
anyone (``m.mentions`` is empty on every message we send, and nothing in the HTML pings).

The HTML is the answer read as every channel reads it (:mod:`channels._markdown`): raw HTML
is shown as text (``Vec<String>``, ``a <b>tag</b>``), ``2*3*4`` keeps its asterisks,
``__init__`` is a name, a task item shows its box (☐, ☑); images are not rendered (an image
URL would make clients fetch it), links keep only http(s) and mailto targets. Long answers
are split on the markdown (code fences kept balanced per part) at :data:`MAX_MESSAGE`
characters: Matrix events may hold 64 KiB, and a part must still fit once turned into HTML.
"""

from __future__ import annotations

from typing import Any

from channels._markdown import markdown
from channels._text import split_message

MAX_MESSAGE = 16_000
HTML = "org.matrix.custom.html"
_MD = markdown()


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
