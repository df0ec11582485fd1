"""The two bodies of an outgoing mail, both from the model's markdown: HTML, and plain text
for the clients (and people) that read the ``text/plain`` part.

One markdown-it parser reads the answer for both, so they say the same thing. The plain
text is what the HTML shows, without markdown's marks: ``**bold**`` and ``*italic*`` lose
their stars, a link is ``label <url>``, a heading is a line of its own, lists keep their
``-`` or numbers (nested ones indented), quotes their ``> ``, a table is one ``a | b`` line
per row, and code is kept as written (a fence's lines without the fence).

No images: ``![chart](https://…)`` is a link (``!chart``), never an ``<img>``. A mail
client, or its provider's image proxy, loads a remote image when the mail is opened or as
soon as it arrives, so an image whose address holds data would carry it out unclicked
(docs/security.md, "Links in what the bot sends"), as the web chat and the chat channels
avoid too (channels/_markdown.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from markdown_it import MarkdownIt
from markdown_it.token import Token

__all__ = ["render_html", "render_text"]

# Raw HTML in the model's markdown is escaped, not passed through; markdown-it also refuses
# javascript:, vbscript:, file: and data: links. No image rule: see above.
_markdown = (
    MarkdownIt("commonmark", {"html": False, "breaks": True})
    .enable(["table", "strikethrough"])
    .disable("image")
)
_BLOCKS = frozenset({"paragraph_open", "heading_open", "blockquote_open", "table_open"})


def render_html(markdown: str) -> str:
    body = _markdown.render(markdown)
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"></head><body>\n{body}</body></html>\n'
    )


def render_text(markdown: str) -> str:
    """The answer as plain text, ending in a newline."""
    writer = _TextWriter()
    for token in _markdown.parse(markdown):
        writer.handle(token)
    return "\n".join(writer.lines).strip("\n") + "\n"


@dataclass(slots=True)
class _TextWriter:
    """Walks markdown-it's block tokens, writing plain lines into ``lines``: a blank line
    before each block, except the items of a tight list and a list nested in an item."""

    lines: list[str] = field(default_factory=list)
    quote: int = 0  # blockquote depth
    items: list[int] = field(default_factory=list)  # per open list item: its marker's width
    marker: str = ""  # an open list item's marker, until its first line is written
    cell: bool = False  # inside a table cell
    row: list[str] = field(default_factory=list)  # a table row's cells

    def handle(self, token: Token) -> None:
        kind = token.type
        if kind == "inline":
            text = _inline(token.children or [])
            if self.cell:
                self.row.append(" ".join(text.split()))
            else:
                self.write(text.split("\n"))
        elif kind in ("fence", "code_block", "hr"):
            self.separate()
            self.write(["———"] if kind == "hr" else token.content.rstrip("\n").split("\n"))
        elif kind.endswith("_open"):
            self.open(token)
        elif kind.endswith("_close"):
            self.close(kind)

    def open(self, token: Token) -> None:
        kind = token.type
        if kind == "list_item_open":
            self.marker = f"{token.info}. " if token.info else "- "
            self.items.append(len(self.marker))
        elif kind in ("th_open", "td_open"):
            self.cell = True
        elif kind in ("bullet_list_open", "ordered_list_open"):
            if not self.items:  # a nested list goes on under its item's text
                self.separate()
        elif kind in _BLOCKS and not token.hidden:  # a tight list's paragraphs are hidden
            self.separate()
            if kind == "blockquote_open":
                self.quote += 1

    def close(self, kind: str) -> None:
        if kind == "list_item_close":
            self.items.pop()
        elif kind == "blockquote_close":
            self.quote -= 1
        elif kind in ("th_close", "td_close"):
            self.cell = False
        elif kind == "tr_close":
            self.write([" | ".join(self.row)])
            self.row = []

    def separate(self) -> None:
        """A blank line (inside the open quotes), unless at the start or after one."""
        if self.lines and self.lines[-1].strip("> "):
            self.lines.append(("> " * self.quote).rstrip())

    def write(self, lines: list[str]) -> None:
        """A block's lines, under the open quotes and list items."""
        quote = "> " * self.quote
        indent = " " * sum(self.items)
        for line in lines:
            lead = indent
            if self.marker:  # the first line of a list item carries its marker
                lead, self.marker = " " * sum(self.items[:-1]) + self.marker, ""
            self.lines.append(f"{quote}{lead}{line}".rstrip() if line else quote.rstrip())


def _inline(children: list[Token]) -> str:
    """A paragraph's or heading's text: emphasis marks dropped, links as ``label <url>``."""
    text: list[str] = []
    links: list[tuple[str, int]] = []  # per open link: its target, where its label starts
    for child in children:
        kind = child.type
        if kind in ("text", "code_inline"):
            text.append(child.content)
        elif kind in ("softbreak", "hardbreak"):
            text.append("\n")
        elif kind == "link_open":
            links.append((str(child.attrGet("href") or ""), len(text)))
        elif kind == "link_close" and links:
            href, start = links.pop()
            label = "".join(text[start:])
            if href and href not in (label, f"mailto:{label}"):
                text.append(f" <{href}>")
        else:  # emphasis marks (strong, em, s) have no content: their text stays
            text.append(child.content)
    return "".join(text)
