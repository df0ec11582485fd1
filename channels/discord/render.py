"""Markdown from the model → Discord messages of at most 2,000 characters.

Discord renders markdown itself (bold, italics, code blocks, ``#`` headings, lists, links),
so text passes through; it is only split, at paragraph, line and word boundaries, with a
code block cut in two closed and reopened with its language (:mod:`channels._text`).
Splitting is deterministic, so a retried message yields the same parts.

Mentions in the model's text never ping: messages go out with ``allowed_mentions`` that
disable ``@everyone``, role and user pings (only the author of the message being replied to
is notified, as a reply normally does).

No link is embedded: every message goes out with the ``SUPPRESS_EMBEDS`` flag
(:data:`NO_EMBEDS`), set again on every edit. Discord would otherwise fetch each link at
once, no click needed, so an address holding data (``https://evil.example/?d=...``) that a
page talked the model into writing would carry it out (docs/security.md).

Every part carries a ``nonce`` derived from the outbound message's idempotency key and the
part's index, sent with ``enforce_nonce``: if a send that timed out had in fact arrived,
Discord returns the existing message for the retry instead of posting it twice (Discord
keeps nonces for a few minutes).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import discord

from channels._text import split_message
from gateway.core.messages import Attachment

MAX_MESSAGE = 2000
MAX_FILES = 10  # attachments per Discord message

ALLOWED_MENTIONS = discord.AllowedMentions(
    everyone=False, users=False, roles=False, replied_user=True
)
NO_EMBEDS = discord.MessageFlags(suppress_embeds=True)  # for edits: send takes suppress_embeds


@dataclass(frozen=True, slots=True)
class Part:
    """One Discord message: text, files, or both."""

    content: str | None
    files: tuple[Path, ...] = ()


def render(text: str, attachments: tuple[Attachment, ...] = ()) -> list[Part]:
    """The messages that carry ``text`` and ``attachments`` (files ride on the last text)."""
    chunks = split_message(text, MAX_MESSAGE) if text.strip() else []
    paths = [Path(a.path) for a in attachments if a.path]
    batches = [tuple(paths[i : i + MAX_FILES]) for i in range(0, len(paths), MAX_FILES)]
    parts = [Part(chunk) for chunk in chunks]
    if batches and parts:
        parts[-1] = Part(parts[-1].content, batches.pop(0))
    parts.extend(Part(None, batch) for batch in batches)
    return parts


def nonce(idempotency_key: str, index: int) -> str:
    """A 24-character nonce (Discord allows 25) that is the same on every retry of a part."""
    return hashlib.blake2b(f"{idempotency_key}:{index}".encode(), digest_size=12).hexdigest()
