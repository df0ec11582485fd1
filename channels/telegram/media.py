"""Inbound files: fetched with ``getFile`` into the workspace, size-capped.

Files land in ``<workspace>/attachments/telegram/<YYYY-MM-DD>/`` under a generated name
built from the chat, the message and Telegram's ``file_unique_id`` — never from the name the
sender chose — so a redelivered update rewrites the same file instead of leaving a copy.
A file that is too large or cannot be fetched still reaches the agent as a note saying so:
the message is never held back (a download that always fails would block every update
behind it), and it is never silently dropped. Voice notes are transcribed after the access
gate, for every channel alike (gateway/runtime/intake/understanding.py).
"""

from __future__ import annotations

import logging
import mimetypes
import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from telegram import Bot
from telegram.error import TelegramError

from channels.telegram.convert import Converted, MediaRef
from gateway.core.messages import Attachment, InboundMessage

log = logging.getLogger(__name__)

_SAFE = re.compile(r"[^A-Za-z0-9_-]")
_DEFAULT_SUFFIX = {"image": ".jpg", "voice": ".ogg", "audio": ".mp3", "video": ".mp4"}


class MediaFetcher:
    def __init__(
        self,
        bot: Bot,
        root: Path,
        *,
        max_bytes: int,
    ) -> None:
        self._bot = bot
        self._root = root
        self._max_bytes = max_bytes

    async def attach(self, converted: Converted, *, download: bool = True) -> InboundMessage:
        """The message with its files stored (or explained) as attachments.

        ``download=False`` for messages that cannot lead to a turn (group chatter, a group
        the bot may not talk in, a stranger): their files are described, not fetched.
        """
        msg = converted.message
        if not converted.media:
            return msg
        attachments = []
        for ref in converted.media:
            if not download:
                attachments.append(_described(ref, "not downloaded: not addressed to the bot"))
                continue
            attachment = await self._fetch(msg, ref)
            if ref.kind == "voice" and attachment.path is None:
                attachment = replace(
                    attachment,
                    note=f"a voice note arrived and could not be stored ({attachment.note})",
                )
            attachments.append(attachment)
        return replace(msg, attachments=tuple(attachments))

    async def _fetch(self, msg: InboundMessage, ref: MediaRef) -> Attachment:
        base = _described(ref)
        if ref.size is not None and ref.size > self._max_bytes:
            return replace(base, note=_too_large(ref.size, self._max_bytes))
        try:
            remote = await self._bot.get_file(ref.file_id)
            if remote.file_size is not None and remote.file_size > self._max_bytes:
                return replace(base, note=_too_large(remote.file_size, self._max_bytes))
            target = self._target(msg, ref, remote.file_path)
            if not (target.exists() and ref.size and target.stat().st_size == ref.size):
                target.parent.mkdir(parents=True, exist_ok=True)
                await remote.download_to_drive(target)
        except (TelegramError, OSError, RuntimeError) as exc:
            log.warning("telegram: could not fetch %s %s: %s", ref.kind, ref.file_id, exc)
            return replace(base, note=f"the file could not be downloaded: {exc}")
        size = target.stat().st_size
        if size > self._max_bytes:
            target.unlink(missing_ok=True)
            return replace(base, note=_too_large(size, self._max_bytes))
        return replace(base, path=str(target), size=size)

    def _target(self, msg: InboundMessage, ref: MediaRef, remote_path: str | None) -> Path:
        day = datetime.now(UTC).strftime("%Y-%m-%d")
        message_id = msg.platform_message_id.rpartition(":")[2]
        stem = "-".join(_SAFE.sub("", part) for part in (msg.chat_id, message_id, ref.unique_id))
        return self._root / day / (stem + _suffix(ref, remote_path))


def _described(ref: MediaRef, note: str | None = None) -> Attachment:
    return Attachment(
        kind=ref.kind,
        mime_type=ref.mime_type,
        filename=ref.filename,
        size=ref.size,
        platform_file_id=ref.file_id,
        note=note,
    )


def _suffix(ref: MediaRef, remote_path: str | None) -> str:
    for candidate in (ref.filename, remote_path):
        if candidate and "." in candidate:
            suffix = "." + _SAFE.sub("", candidate.rsplit(".", 1)[1])[:10].lower()
            if len(suffix) > 1:
                return suffix
    if ref.mime_type:
        guessed = mimetypes.guess_extension(ref.mime_type)
        if guessed:
            return guessed
    return _DEFAULT_SUFFIX.get(ref.kind, ".bin")


def _too_large(size: int, limit: int) -> str:
    return f"not stored: {size} bytes is over the {limit}-byte limit"
