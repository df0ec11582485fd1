"""Markdown from the model → Signal messages: plain text with Signal's text styles.

Signal shows ``BOLD``, ``ITALIC``, ``STRIKETHROUGH``, ``MONOSPACE`` and ``SPOILER`` ranges
over a message's text (signal-cli's ``textStyle``: ``start:length:STYLE`` in UTF-16 code
units). So the markers go and their ranges stay: ``**x**`` is bold, ``*x*`` italic,
``~~x~~`` struck through, code (inline and blocks) monospace, headings bold; lists keep
their bullets or numbers, links show their address after the text, images and raw HTML
are not rendered (shown as written).

A long answer is split on the markdown first (code blocks kept balanced per part), each
part within :data:`MAX_MESSAGE_BYTES` of UTF-8 once rendered: signal-cli turns a longer body
into a "long text" attachment, which some clients show only on request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from markdown_it import MarkdownIt
from markdown_it.token import Token

from channels._text import split_message, utf16_length

MAX_MESSAGE_BYTES = 2_000
Style = Literal["BOLD", "ITALIC", "STRIKETHROUGH", "MONOSPACE", "SPOILER"]
_INLINE: dict[str, Style] = {"strong": "BOLD", "em": "ITALIC", "s": "STRIKETHROUGH"}


def _build() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "breaks": True})
    return md.enable("strikethrough").disable(["image", "html_block", "html_inline"])


_MD = _build()


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
    writer = _Writer()
    writer.blocks(_MD.parse(markdown))
    text = "".join(writer.out).rstrip()
    if not text:
        return Part(markdown)
    limit = utf16_length(text)
    styles = tuple(
        f"{start}:{min(length, limit - start)}:{style}"
        for start, length, style in writer.styles
        if start < limit
    )
    return Part(text, styles)


@dataclass(slots=True)
class _Writer:
    out: list[str] = field(default_factory=list)
    styles: list[tuple[int, int, Style]] = field(default_factory=list)
    position: int = 0  # UTF-16 units written
    lists: list[list[int]] = field(default_factory=list)  # per open list: [ordered, next number]
    quote: int = 0  # blockquote depth
    item_start: bool = False  # a list item's bullet was just written: its text follows

    def write(self, text: str) -> None:
        if text:
            self.out.append(text)
            self.position += utf16_length(text)
            self.item_start = False

    def styled(self, text: str, style: Style) -> None:
        start = self.position
        self.write(text)
        if self.position > start:
            self.styles.append((start, self.position - start, style))

    def new_block(self) -> None:
        if self.item_start:
            return
        if self.out:
            self.write("\n" if self.lists else "\n\n")
        if self.quote:
            self.write("> " * self.quote)

    def list_token(self, token: Token) -> None:
        kind = token.type
        if kind in ("bullet_list_open", "ordered_list_open"):
            start = int(token.attrGet("start") or 1) if kind == "ordered_list_open" else 0
            if self.out and not self.lists:
                self.write("\n")  # a blank line before a list, as before a paragraph
            self.lists.append([kind == "ordered_list_open", start])
        elif kind in ("bullet_list_close", "ordered_list_close"):
            self.lists.pop()
        elif kind == "list_item_open":
            self.write("\n" if self.out else "")
            if self.quote:
                self.write("> " * self.quote)
            current = self.lists[-1]
            indent = "  " * (len(self.lists) - 1)
            self.write(f"{indent}{current[1]}. " if current[0] else f"{indent}• ")
            current[1] += 1
            self.item_start = True

    def blocks(self, tokens: list[Token]) -> None:
        heading_start: int | None = None
        for token in tokens:
            kind = token.type
            if kind == "paragraph_open" and not token.hidden:
                self.new_block()
            elif kind == "heading_open":
                self.new_block()
                heading_start = self.position
            elif kind == "heading_close" and heading_start is not None:
                if self.position > heading_start:
                    self.styles.append((heading_start, self.position - heading_start, "BOLD"))
                heading_start = None
            elif (
                kind.endswith("list_open")
                or kind.endswith("list_close")
                or kind == "list_item_open"
            ):
                self.list_token(token)
            elif kind == "blockquote_open":
                self.quote += 1
            elif kind == "blockquote_close":
                self.quote -= 1
            elif kind in ("fence", "code_block"):
                self.new_block()
                self.styled(token.content.rstrip("\n"), "MONOSPACE")
            elif kind == "hr":
                self.new_block()
                self.write("———")
            elif kind == "inline":
                self.inline(token.children or [])

    def inline(self, children: list[Token]) -> None:
        opened: list[tuple[str, int]] = []
        href: list[str] = []
        for child in children:
            kind = child.type
            if kind == "text":
                self.write(child.content)
            elif kind in ("softbreak", "hardbreak"):
                self.write("\n")
            elif kind == "code_inline":
                self.styled(child.content, "MONOSPACE")
            elif kind.endswith("_open") and kind[:-5] in _INLINE:
                opened.append((kind[:-5], self.position))
            elif kind.endswith("_close") and kind[:-6] in _INLINE and opened:
                name, start = opened.pop()
                if self.position > start:
                    self.styles.append((start, self.position - start, _INLINE[name]))
            elif kind == "link_open":
                href.append(str(child.attrGet("href") or ""))
            elif kind == "link_close" and href:
                target = href.pop()
                shown = "".join(self.out[-1:])
                if target and not shown.endswith(target) and not target.startswith("mailto:"):
                    self.write(f" ({target})")
            elif kind == "image":
                self.write(child.content)
