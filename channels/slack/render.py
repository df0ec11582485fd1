"""Markdown from the model → Slack mrkdwn messages.

slackify-markdown converts CommonMark to mrkdwn (``**b**`` → ``*b*``, links → ``<url|text>``,
headings → bold lines, ``&``/``<``/``>`` escaped so text cannot turn into a mention or a
link). Splitting happens on the markdown first, with code fences kept balanced per chunk
(:mod:`channels._text`), then each chunk is converted on its own. Slack accepts up to 40,000
characters but truncates and folds long messages; chunks of 3,500 characters stay readable
and leave room for the little that conversion adds. Deterministic: a retry yields the same
parts. A conversion failure sends the chunk as written rather than losing it.
"""

from __future__ import annotations

import logging

from slackify_markdown import slackify_markdown  # type: ignore[import-untyped]

from channels._text import split_message

log = logging.getLogger(__name__)

CHUNK = 3_500


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
