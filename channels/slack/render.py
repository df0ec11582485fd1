"""Markdown from the model → Slack mrkdwn messages.

slackify-markdown converts CommonMark to mrkdwn (``**b**`` → ``*b*``, links → ``<url|text>``,
headings → bold lines, ``&``/``<``/``>`` escaped so text cannot turn into a mention or a
link). Splitting happens on the markdown first, with code fences kept balanced per chunk
(:mod:`channels._text`), then each chunk is converted on its own. Slack accepts up to 40,000
characters but truncates and folds long messages; chunks of 3,500 characters stay readable
and leave room for the little that conversion adds. Deterministic: a retry yields the same
parts. A conversion failure sends the chunk as written rather than losing it. A message's
verbatim block (approval prompts) skips conversion: :func:`render_message`.

No link or media in a message the bot posts or updates is unfurled (:data:`NO_UNFURL`):
Slack would fetch it at once, no click needed, so an address holding data
(``https://evil.example/?d=...``) that a page talked the model into writing would carry it
out (docs/security.md). ``chat.update`` documents no such arguments; they are sent there too.
"""

from __future__ import annotations

import logging
from typing import Final, TypedDict

from slackify_markdown import slackify_markdown  # type: ignore[import-untyped]

from channels._text import split_message
from gateway.core.messages import OutboundMessage
from gateway.core.text.verbatim import unclosable

log = logging.getLogger(__name__)

CHUNK = 3_500


class Unfurl(TypedDict):
    unfurl_links: bool
    unfurl_media: bool


NO_UNFURL: Final[Unfurl] = {"unfurl_links": False, "unfurl_media": False}


def render(markdown: str, *, limit: int = CHUNK) -> list[str]:
    parts = []
    for chunk in split_message(markdown, limit) if markdown.strip() else []:
        try:
            text = str(slackify_markdown(chunk)).strip()
        except Exception:  # a converter bug must not cost the user the answer
            log.warning("slack: markdown conversion failed; sending the text as written")
            text = chunk
        parts.append(text or chunk)
    return parts


def render_message(message: OutboundMessage, *, limit: int = CHUNK) -> list[str]:
    """``message`` as mrkdwn parts; its verbatim block, if any, goes in code blocks of its
    own, never converted: ``&``, ``<`` and ``>`` escaped (no link, mention or
    ``<!channel>`` can form in it) and no run of backticks left to close the block."""
    prose = message.prose
    if prose is None:
        return render(message.text, limit=limit)
    escaped = (
        unclosable(message.verbatim).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    )
    chunks, current = [], ""
    for whole in escaped.split("\n"):
        line = whole
        while len(line) > limit - 10:  # one line longer than a part: cut it
            if current:
                chunks.append(current)
                current = ""
            chunks.append(line[: limit - 10])
            line = line[limit - 10 :]
        if current and len(current) + 1 + len(line) > limit - 10:
            chunks.append(current)
            current = line
        else:
            current = f"{current}\n{line}" if current else line
    chunks.append(current)
    parts = render(prose, limit=limit) if prose.strip() else []
    blocks = [f"```\n{chunk}\n```" for chunk in chunks]
    if parts and len(blocks) == 1 and len(parts[-1]) + 2 + len(blocks[0]) <= limit:
        return [*parts[:-1], f"{parts[-1]}\n\n{blocks[0]}"]  # one message, as written
    return [*parts, *blocks]
