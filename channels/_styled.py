"""An answer's markdown as plain text with styled ranges over it, for the channels whose
messages are that: Telegram (entities) and Signal (text styles).

Read by :mod:`channels._markdown`, as every channel reads answers: the markup goes and
everything else stays as the model wrote it (``Vec<String>``, ``2*3*4``, ``__init__``,
``&``). Headings are bold; list items keep a bullet (•) or their number (with the model's own
``.`` or ``)``), task items their box (☐ open, ☑ done) instead of the bullet, nested items
are indented; code blocks are ``pre`` with their language; a table is a ``pre`` block of
aligned columns (a link in it shows its address, which a ``pre`` cannot link); a rule is
``———``. Offsets and lengths count UTF-16 code units, as both platforms do.

Two things depend on what the platform can show:

* ``link_ranges``: a link is a range with its address (Telegram's ``text_link``; code inside
  it is then shown as text, since Telegram lets no range be code and a link at once), or
  its address is written after its label where the label does not show it. A ``mailto:``
  link is always the latter.
* ``quote_ranges``: a quote is one range over its text (Telegram's ``blockquote``: the
  outermost only, as Telegram nests none), or each of its blocks begins with ``> ``.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from typing import Literal

from markdown_it.token import Token

from channels._markdown import markdown
from channels._text import utf16_length

Kind = Literal["bold", "italic", "strike", "code", "pre", "link", "quote"]
RULE = "———"
_INLINE: dict[str, Kind] = {"strong": "bold", "em": "italic", "s": "strike"}
_MD = markdown()


@dataclass(frozen=True, slots=True)
class Span:
    """A styled range of the text: ``kind`` over ``length`` UTF-16 units from ``offset``."""

    kind: Kind
    offset: int
    length: int
    url: str | None = None  # a link's address
    language: str | None = None  # a code block's language


def styled(markdown: str, *, link_ranges: bool, quote_ranges: bool) -> tuple[str, list[Span]]:
    """``markdown`` as the text a person reads and its styled ranges, ordered by where they
    begin (the longer first), none past the text's end."""
    writer = _Writer(link_ranges=link_ranges, quote_ranges=quote_ranges)
    writer.blocks(_MD.parse(markdown))
    text = "".join(writer.out).rstrip()
    size = utf16_length(text)
    spans = [
        span if span.offset + span.length <= size else _cut_to(span, size)
        for span in writer.spans
        if span.offset < size and span.length > 0
    ]
    return text, sorted(spans, key=lambda s: (s.offset, -s.length))


def _cut_to(span: Span, size: int) -> Span:
    return Span(span.kind, span.offset, size - span.offset, span.url, span.language)


@dataclass(slots=True)
class _Writer:
    link_ranges: bool
    quote_ranges: bool
    out: list[str] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    position: int = 0  # UTF-16 units written
    lists: list[list[int]] = field(default_factory=list)  # per open list: [ordered, next number]
    quotes: list[int] = field(default_factory=list)  # where each open quote's text begins
    fresh: bool = True  # a block (or a list item's bullet) just began: its text follows

    def write(self, text: str) -> None:
        if text:
            self.out.append(text)
            self.position += utf16_length(text)
            self.fresh = False

    def mark(
        self, kind: Kind, start: int, *, url: str | None = None, language: str | None = None
    ) -> None:
        if self.position > start:
            self.spans.append(Span(kind, start, self.position - start, url, language))

    def new_block(self) -> None:
        self.separate()
        self.quoted_line()

    def separate(self) -> None:
        """Separate what comes from what was written: a blank line, a line in a list."""
        if not self.fresh:
            self.write("\n" if self.lists else "\n\n")
        self.fresh = True

    def quoted_line(self) -> None:
        """At the start of a line in a quote shown by its lines: the ``> `` (once)."""
        if self.quotes and not self.quote_ranges and (not self.out or self.out[-1][-1] == "\n"):
            fresh = self.fresh
            self.write("> " * len(self.quotes))
            self.fresh = fresh

    def blocks(self, tokens: list[Token]) -> None:
        heading = 0
        index = 0
        while index < len(tokens):
            token = tokens[index]
            kind = token.type
            index += 1
            if kind == "inline":
                self.inline(token.children or [])
            elif kind == "table_open":
                index = self.table(tokens, index)
            elif kind in ("paragraph_open", "heading_open"):
                if not token.hidden:  # a tight list's paragraphs are hidden
                    self.new_block()
                heading = self.position
            elif kind == "heading_close":
                self.mark("bold", heading)
            elif kind in ("fence", "code_block", "hr"):
                self.leaf(token)
            else:
                self.container(token)

    def leaf(self, token: Token) -> None:
        self.new_block()
        if token.type == "hr":
            self.write(RULE)
            return
        start = self.position
        self.write(token.content.removesuffix("\n"))
        language = token.info.split()[0] if token.info.strip() else None
        self.mark("pre", start, language=language)

    def container(self, token: Token) -> None:
        """Lists, their items and quotes."""
        kind = token.type
        if kind in ("bullet_list_open", "ordered_list_open"):
            if not self.lists:
                self.new_block()
            start = int(token.attrGet("start") or 1) if kind == "ordered_list_open" else 0
            self.lists.append([kind == "ordered_list_open", start])
        elif kind in ("bullet_list_close", "ordered_list_close"):
            self.lists.pop()
        elif kind == "list_item_open":
            self.item(token)
        elif kind == "blockquote_open":
            self.separate()
            self.quotes.append(self.position)
        elif kind == "blockquote_close":
            start = self.quotes.pop()
            if self.quote_ranges and not self.quotes:  # the outermost: Telegram nests none
                self.mark("quote", start)

    def item(self, token: Token) -> None:
        if not self.fresh:
            self.write("\n")
        self.quoted_line()
        current = self.lists[-1]
        indent = "  " * (len(self.lists) - 1)
        if current[0]:  # its number, with the model's own "." or ")"
            self.write(f"{indent}{current[1]}{token.markup or '.'} ")
            current[1] += 1
        elif token.meta.get("task"):  # its box (☐, ☑) begins its text: no bullet
            self.write(indent)
        else:
            self.write(f"{indent}• ")
        self.fresh = True

    def inline(self, children: list[Token]) -> None:
        opened: list[tuple[Kind, int, str | None, int]] = []  # (kind, start, link, in out)
        for child in children:
            kind = child.type
            if kind == "text":
                self.write(child.content)
            elif kind in ("softbreak", "hardbreak"):
                self.write("\n")
                self.quoted_line()
            elif kind == "code_inline":
                start = self.position
                self.write(child.content)
                if not (self.link_ranges and any(link for _, _, link, _ in opened)):
                    self.mark("code", start)
            elif kind.endswith("_open") and kind[:-5] in _INLINE:
                opened.append((_INLINE[kind[:-5]], self.position, None, len(self.out)))
            elif kind == "link_open":
                href = str(child.attrGet("href"))
                opened.append(("link", self.position, href, len(self.out)))
            elif kind.endswith("_close") and opened:
                style, start, link, written = opened.pop()
                if link is None:
                    self.mark(style, start)
                elif self.link_ranges and not link.lower().startswith("mailto:"):
                    self.mark("link", start, url=link)
                else:  # no link: the address shows
                    address = _address(link)
                    if address not in "".join(self.out[written:]):
                        self.write(f" ({address})")

    def table(self, tokens: list[Token], index: int) -> int:
        """Write the table that starts before ``tokens[index]`` as a ``pre`` block of
        aligned columns; returns the index after it."""
        rows: list[list[str]] = []
        while index < len(tokens) and tokens[index].type != "table_close":
            token = tokens[index]
            if token.type == "tr_open":
                rows.append([])
            elif token.type == "inline" and rows:
                rows[-1].append(_cell(token.children or []))
            index += 1
        columns = max((len(row) for row in rows), default=0)
        widths = [
            max((_width(row[i]) for row in rows if i < len(row)), default=0) for i in range(columns)
        ]
        lines = []
        for number, row in enumerate(rows):
            cells = [*row, *[""] * (columns - len(row))]
            line = " | ".join(c + " " * (w - _width(c)) for c, w in zip(cells, widths, strict=True))
            lines.append(line.rstrip())
            if number == 0 and len(rows) > 1:
                lines.append("-+-".join("-" * w for w in widths))
        self.new_block()
        start = self.position
        self.write("\n".join(lines))
        self.mark("pre", start)
        return index + 1


def _address(link: str) -> str:
    """What a person would type to reach ``link``: a mail address without ``mailto:``."""
    return link[len("mailto:") :] if link.lower().startswith("mailto:") else link


def _cell(children: list[Token]) -> str:
    """A table cell's words, as a ``pre`` block shows them: links with their address."""
    out: list[str] = []
    links: list[str] = []
    for child in children:
        if child.type in ("text", "code_inline"):
            out.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            out.append(" ")
        elif child.type == "link_open":
            links.append(str(child.attrGet("href")))
        elif child.type == "link_close" and links:
            address = _address(links.pop())
            if not "".join(out).endswith(address):
                out.append(f" ({address})")
    return "".join(out)


def _width(text: str) -> int:
    """Columns ``text`` takes in a monospace font: wide (CJK, emoji) characters two,
    combining marks none."""
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
        for c in text
    )
