"""Markdown from the model → Telegram messages: text plus entities, at most 4096 UTF-16 units.

Why entities and not ``parse_mode``: MarkdownV2 needs every ``_*[]()~`>#+-=|{}.!`` escaped,
and one missed character makes Telegram reject the whole message. Here the markdown is
read into plain text plus ``MessageEntity`` ranges, which cannot be mis-escaped.

It is read as every channel reads it (:mod:`channels._markdown`), so it shows the same words
as the web chat: the markup goes and everything else stays as the model wrote it
(``Vec<String>``, ``2*3*4``, ``__init__``, ``&``). :mod:`channels._styled` writes the text
and its ranges, as for Signal: headings bold, list items with a bullet (•) or their number,
task items with their box (☐ open, ☑ done) instead of the bullet, code blocks ``pre`` with
their language, a table a ``pre`` block of aligned columns. Here a link is a ``text_link``
entity (inside it, code is shown as text: Telegram lets no entity hold a ``code`` and a
link at once) and a quote one ``blockquote`` entity (Telegram nests none).

Splitting happens on the markdown first (:func:`channels._text.split_message`, which keeps
code fences balanced per chunk), then each chunk is converted on its own, so every entity
offset is relative to the message it travels in. A converted chunk still over the limit (a
table's padding) is cut once more at a line, its entities cut with it. Each part remembers
a plain-text fallback for when Telegram rejects its entities ("can't parse entities"):
nothing is ever dropped. A message's verbatim block (approval prompts) never goes through
markdown: :func:`render_message`.
"""

from __future__ import annotations

from dataclasses import dataclass

from telegram import MessageEntity

from channels._styled import Kind, styled
from channels._text import split_message, utf16_length
from gateway.core.messages import OutboundMessage

MAX_MESSAGE = 4096  # UTF-16 code units, as Telegram counts
MAX_CAPTION = 1024
_ENTITY: dict[Kind, str] = {
    "bold": MessageEntity.BOLD,
    "italic": MessageEntity.ITALIC,
    "strike": MessageEntity.STRIKETHROUGH,
    "code": MessageEntity.CODE,
    "pre": MessageEntity.PRE,
    "link": MessageEntity.TEXT_LINK,
    "quote": MessageEntity.BLOCKQUOTE,
}


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
    text, spans = styled(markdown, link_ranges=True, quote_ranges=True)
    return text, tuple(
        MessageEntity(_ENTITY[s.kind], s.offset, s.length, url=s.url, language=s.language)
        for s in spans
    )


def _clipped(entity: MessageEntity, size: int) -> MessageEntity:
    if entity.offset + entity.length <= size:
        return entity
    return _entity(entity, entity.offset, size - entity.offset)


def _entity(like: MessageEntity, offset: int, length: int) -> MessageEntity:
    return MessageEntity(like.type, offset, length, url=like.url, language=like.language)


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
