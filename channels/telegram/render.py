"""Markdown from the model → Telegram messages: text plus entities, at most 4096 UTF-16 units.

Why entities and not ``parse_mode``: MarkdownV2 needs every ``_*[]()~`>#+-=|{}.!`` escaped,
and one missed character makes Telegram reject the whole message. telegramify-markdown
turns markdown into plain text plus ``MessageEntity`` ranges, which cannot be mis-escaped.

Splitting happens on the markdown first (:func:`channels._text.split_message`, which keeps
code fences balanced per chunk), then each chunk is converted on its own, so every entity
offset is relative to the message it travels in. Conversion can grow a chunk slightly
(headings gain a marker); a converted chunk still over the limit is cut once more with the
library's entity-aware splitter. Each part remembers a plain-text fallback for when Telegram
rejects its entities ("can't parse entities"): nothing is ever dropped. A message's
verbatim block (approval prompts) never goes through markdown: :func:`render_message`.
"""

from __future__ import annotations

from dataclasses import dataclass

import telegramify_markdown
from telegram import MessageEntity

from channels._text import split_message, utf16_length
from gateway.core.messages import OutboundMessage

MAX_MESSAGE = 4096  # UTF-16 code units, as Telegram counts
MAX_CAPTION = 1024


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
            text, entities = telegramify_markdown.convert(chunk)
        except Exception:  # a converter bug must not cost the user the answer
            text, entities = chunk, []
        if not text.strip():
            parts.append(Part(chunk, (), chunk))  # rendered to nothing: send it as written
        elif utf16_length(text) <= limit:
            parts.append(Part(text, _ptb(entities), chunk))
        else:
            parts.extend(
                Part(piece, _ptb(piece_entities), piece)
                for piece, piece_entities in telegramify_markdown.split_entities(
                    text, entities, limit
                )
            )
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


def _ptb(entities: list[telegramify_markdown.MessageEntity]) -> tuple[MessageEntity, ...]:
    return tuple(MessageEntity.de_json(e.to_dict(), None) for e in entities)
