"""Inbound Discord attachments: downloaded into the workspace, size-capped, never dropped.

Files land in ``<workspace>/attachments/discord/<YYYY-MM-DD>/<message id>-<n><.ext>``: the
name is generated (the sender's file name is kept only as ``Attachment.filename``), and a
message replayed after a RESUME rewrites the same file instead of leaving a copy. Writes go
to a temporary file that is renamed into place, so a half-written file never has the name.

A file over ``max_attachment_bytes`` (Discord states the size before any download) or one
that cannot be fetched still reaches the agent, as an attachment without a path and a note
saying why: the message itself is never held back.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import aiohttp
import discord

from channels.discord.convert import attachment_kind
from gateway.core.messages import Attachment
from gateway.core.system.fileutil import write_atomic

log = logging.getLogger(__name__)

_SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,10}$")


class MediaStore:
    def __init__(self, workspace_dir: Path, *, max_bytes: int) -> None:
        self.root = workspace_dir / "attachments" / "discord"
        self.max_bytes = max_bytes

    async def fetch(
        self, message: discord.Message, items: Sequence[discord.Attachment]
    ) -> tuple[Attachment, ...]:
        """``items`` of ``message`` (its own files, and those of what it forwards), stored."""
        day = message.created_at.strftime("%Y-%m-%d")
        stored = []
        for index, item in enumerate(items):
            stored.append(await self._fetch_one(item, self.root / day, f"{message.id}-{index}"))
        return tuple(stored)

    async def _fetch_one(self, item: discord.Attachment, folder: Path, stem: str) -> Attachment:
        described = Attachment(
            kind=attachment_kind(item),
            mime_type=item.content_type,
            filename=item.filename,
            size=item.size,
            platform_file_id=str(item.id),
        )
        if item.size > self.max_bytes:
            note = f"not stored: {item.size} bytes is over the {self.max_bytes} byte limit"
            return replace(described, note=note)
        suffix = match.group(0).lower() if (match := _SUFFIX.search(item.filename)) else ""
        path = folder / f"{stem}{suffix}"
        try:
            data = await item.read()
        except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.warning("discord: could not download attachment %s: %s", item.id, exc)
            return replace(described, note=f"could not be downloaded: {exc}")
        if len(data) > self.max_bytes:  # the stated size was wrong; do not keep the surplus
            return replace(described, note=f"not stored: over the {self.max_bytes} byte limit")
        await asyncio.to_thread(write_atomic, path, data)
        return replace(described, path=str(path), size=len(data))
