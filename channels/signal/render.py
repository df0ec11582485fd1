"""Markdown from the model → Signal messages: plain text with Signal's text styles.

Signal shows ``BOLD``, ``ITALIC``, ``STRIKETHROUGH``, ``MONOSPACE`` and ``SPOILER`` ranges
over a message's text (signal-cli's ``textStyle``: ``start:length:STYLE`` in UTF-16 code
units). The answer is read as every channel reads it (:mod:`channels._markdown`: what is not
markup stays as the model wrote it, ``Vec<String>``, ``2*3*4``, ``__init__``) and written by
:mod:`channels._styled`, as for Telegram: the markers go and their ranges stay. ``**x**`` is
bold, ``*x*`` italic, ``~~x~~`` struck through, code (inline and blocks) monospace, headings
bold; lists keep their bullets or numbers, task items their box (☐ open, ☑ done) instead of
the bullet; a table is monospace aligned columns. Signal links nothing itself: a link shows
its address after its text (where the text does not show it), and each block of a quote
begins with ``> ``.

A long answer is split on the markdown first (code blocks kept balanced per part), each
part's markdown within :data:`MAX_MESSAGE_BYTES` of UTF-8 (rendered, it is shorter but for
a link's address or a table's padding): signal-cli turns a longer body into a "long text"
attachment, which some clients show only on request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from channels._styled import Kind, styled
from channels._text import split_message

MAX_MESSAGE_BYTES = 2_000
Style = Literal["BOLD", "ITALIC", "STRIKETHROUGH", "MONOSPACE", "SPOILER"]
_STYLE: dict[Kind, Style] = {
    "bold": "BOLD",
    "italic": "ITALIC",
    "strike": "STRIKETHROUGH",
    "code": "MONOSPACE",
    "pre": "MONOSPACE",
}


@dataclass(frozen=True, slots=True)
class Part:
    """One Signal message: its text and style ranges (``start:length:STYLE``)."""

    text: str
    styles: tuple[str, ...] = ()


def parts(markdown: str) -> list[Part]:
    """The messages an answer takes, in order; deterministic."""
    return [
        render(chunk)
        for chunk in split_message(
            markdown.strip(), MAX_MESSAGE_BYTES, length=lambda s: len(s.encode())
        )
    ]


def render(markdown: str) -> Part:
    """One part's text and styles."""
    text, spans = styled(markdown, link_ranges=False, quote_ranges=False)
    if not text:
        return Part(markdown)
    styles = (f"{s.offset}:{s.length}:{_STYLE[s.kind]}" for s in spans if s.kind in _STYLE)
    return Part(text, tuple(styles))
