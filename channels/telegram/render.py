"""Markdown from the model → Telegram messages: text plus entities, at most 4096 UTF-16 units.

Why entities and not ``parse_mode``: MarkdownV2 needs every ``_*[]()~`>#+-=|{}.!`` escaped,
and one missed character makes Telegram reject the whole message. Here the markdown is
read into plain text plus ``MessageEntity`` ranges, which cannot be mis-escaped.

It is read as the web chat reads it (:mod:`channels._markdown`), so the two show the same
words: the markup goes and everything else stays as the model wrote it (``Vec<String>``,
``2*3*4``, ``__init__``, ``&``). Headings are bold; list items keep a bullet (•) or their
number, task items their box (☐ open, ☑ done) instead of the bullet, nested items are
indented; a quote is one ``blockquote`` entity (Telegram nests none); code blocks are
``pre`` with their language; a table is a ``pre`` block of aligned columns (a link in it
shows its address, which a ``pre`` cannot link); a rule is ``———``. Inside a link, code is
shown as text (Telegram lets no entity hold a ``code`` and a link at once).

Splitting happens on the markdown first (:func:`channels._text.split_message`, which keeps
code fences balanced per chunk), then each chunk is converted on its own, so every entity
offset is relative to the message it travels in. A converted chunk still over the limit (a
table's padding) is cut once more at a line, its entities cut with it. Each part remembers
a plain-text fallback for when Telegram rejects its entities ("can't parse entities"):
nothing is ever dropped. A message's verbatim block (approval prompts) never goes through
markdown: :func:`render_message`.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field

from markdown_it.token import Token
from telegram import MessageEntity

from channels._markdown import markdown
from channels._text import split_message, utf16_length
from gateway.core.messages import OutboundMessage

MAX_MESSAGE = 4096  # UTF-16 code units, as Telegram counts
MAX_CAPTION = 1024
RULE = "———"
_INLINE = {
    "strong": MessageEntity.BOLD,
    "em": MessageEntity.ITALIC,
    "s": MessageEntity.STRIKETHROUGH,
}
_MD = markdown()


@dataclass(frozen=True, slots=True)
class Part:
    """One Telegram message: ``text`` with ``entities``, or ``plain`` if entities are refused."""

    text: str
    entities: tuple[MessageEntity, ...]
    plain: str


def render(markdown: str, *, limit: int = MAX_MESSAGE) -> list[Part]:
    """The messages that carry ``markdown``; deterministic, so a retry yields the same parts."""
    parts: list[Part] = []
    for chunk in split_message(markdown, limit, length=utf16_length):
        try:
            text, entities = convert(chunk)
        except Exception:  # a converter bug must not cost the user the answer
            text, entities = chunk, ()
        if not text.strip():
            parts.append(Part(chunk, (), chunk))  # rendered to nothing: send it as written
        elif utf16_length(text) <= limit:
            parts.append(Part(text, entities, chunk))
        else:
            parts.extend(_cut(text, entities, limit))
    return parts


def render_message(message: OutboundMessage, *, limit: int = MAX_MESSAGE) -> list[Part]:
    """The parts of ``message``; its :attr:`~OutboundMessage.verbatim` block, if any, is one
    ``pre`` entity placed by offsets after the prose (in the last part when it fits, else
    in a part of its own), so nothing in it is ever read as markdown."""
    prose = message.prose
    if prose is None:
        return render(message.text, limit=limit)
    block = message.verbatim
    if utf16_length(block) > limit:  # the prompt keeps it far shorter; never drop it
        return render(message.text, limit=limit)
    parts = render(prose, limit=limit) if prose.strip() else []
    pre = MessageEntity(MessageEntity.PRE, 0, utf16_length(block))
    if parts and utf16_length(parts[-1].text) + 2 + utf16_length(block) <= limit:
        last = parts.pop()
        offset = utf16_length(last.text) + 2
        placed = MessageEntity(MessageEntity.PRE, offset, utf16_length(block))
        text = f"{last.text}\n\n{block}"
        return [*parts, Part(text, (*last.entities, placed), f"{last.plain}\n\n{block}")]
    return [*parts, Part(block, (pre,), block)]


def convert(markdown: str) -> tuple[str, tuple[MessageEntity, ...]]:
    """``markdown`` as Telegram shows it: the text and its entities (UTF-16 offsets)."""
    writer = _Writer()
    writer.blocks(_MD.parse(markdown))
    text = "".join(writer.out).rstrip()
    size = utf16_length(text)
    entities = sorted(
        (
            _clipped(entity, size)
            for entity in writer.entities
            if entity.offset < size and entity.length > 0
        ),
        key=lambda e: (e.offset, -e.length),
    )
    return text, tuple(entities)


def _clipped(entity: MessageEntity, size: int) -> MessageEntity:
    if entity.offset + entity.length <= size:
        return entity
    return _entity(entity, entity.offset, size - entity.offset)


def _entity(like: MessageEntity, offset: int, length: int) -> MessageEntity:
    return MessageEntity(like.type, offset, length, url=like.url, language=like.language)


@dataclass(slots=True)
class _Writer:
    out: list[str] = field(default_factory=list)
    entities: list[MessageEntity] = field(default_factory=list)
    position: int = 0  # UTF-16 units written
    lists: list[list[int]] = field(default_factory=list)  # per open list: [ordered, next number]
    quotes: list[int] = field(default_factory=list)  # where each open quote began
    fresh: bool = True  # a block (or a list item's bullet) just began: its text follows

    def write(self, text: str) -> None:
        if text:
            self.out.append(text)
            self.position += utf16_length(text)
            self.fresh = False

    def mark(
        self, kind: str, start: int, *, url: str | None = None, language: str | None = None
    ) -> None:
        if self.position > start:
            self.entities.append(
                MessageEntity(kind, start, self.position - start, url=url, language=language)
            )

    def new_block(self) -> None:
        """Separate what comes from what was written: a blank line, a line in a list."""
        if not self.fresh:
            self.write("\n" if self.lists else "\n\n")
        self.fresh = True

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
                self.mark(MessageEntity.BOLD, heading)
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
        self.mark(MessageEntity.PRE, start, language=language)

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
            self.new_block()
            self.quotes.append(self.position)
        elif kind == "blockquote_close":
            start = self.quotes.pop()
            if not self.quotes:  # the outermost only: Telegram nests no quotes
                self.mark(MessageEntity.BLOCKQUOTE, start)

    def item(self, token: Token) -> None:
        if not self.fresh:
            self.write("\n")
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
        opened: list[tuple[str, int, str | None, int]] = []  # (entity, start, link, in out)
        for child in children:
            kind = child.type
            if kind == "text":
                self.write(child.content)
            elif kind in ("softbreak", "hardbreak"):
                self.write("\n")
            elif kind == "code_inline":
                start = self.position
                self.write(child.content)
                if not any(link is not None for _, _, link, _ in opened):
                    self.mark(MessageEntity.CODE, start)
            elif kind.endswith("_open") and kind[:-5] in _INLINE:
                opened.append((_INLINE[kind[:-5]], self.position, None, len(self.out)))
            elif kind == "link_open":
                href = str(child.attrGet("href"))
                opened.append((MessageEntity.TEXT_LINK, self.position, href, len(self.out)))
            elif kind.endswith("_close") and opened:
                entity, start, link, written = opened.pop()
                if link is None:
                    self.mark(entity, start)
                elif link.lower().startswith("mailto:"):  # no link entity: the address shows
                    address = link[len("mailto:") :]
                    if address not in "".join(self.out[written:]):
                        self.write(f" ({address})")
                else:
                    self.mark(entity, start, url=link)

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
        self.mark(MessageEntity.PRE, start)
        return index + 1


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
            link = links.pop()
            address = link.removeprefix("mailto:")
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


def _cut(text: str, entities: tuple[MessageEntity, ...], limit: int) -> list[Part]:
    """``text`` (converted, over ``limit``) as several parts, cut at lines where it can be,
    each with the pieces of the entities that fall in it."""
    parts: list[Part] = []
    while text:
        fits = _longest(text, limit)
        cut = fits if fits == len(text) else text.rfind("\n", 0, fits) + 1 or fits
        piece, text = text[:cut], text[cut:]
        size = utf16_length(piece)
        inside = []
        for entity in entities:
            start, end = max(entity.offset, 0), min(entity.offset + entity.length, size)
            if end > start:
                inside.append(_entity(entity, start, end - start))
        shown = piece.rstrip("\n")
        if shown.strip():
            kept = (
                _clipped(e, utf16_length(shown)) for e in inside if e.offset < utf16_length(shown)
            )
            parts.append(Part(shown, tuple(kept), shown))
        entities = tuple(
            _entity(e, e.offset - size, e.length)
            if e.offset >= size
            else _entity(e, 0, e.offset + e.length - size)
            for e in entities
            if e.offset + e.length > size
        )
    return parts


def _longest(text: str, limit: int) -> int:
    """The most characters of ``text`` within ``limit`` UTF-16 units."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if utf16_length(text[:middle]) <= limit:
            low = middle
        else:
            high = middle - 1
    return max(low, 1)
