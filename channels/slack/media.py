"""Inbound Slack files: fetched with the bot token into the workspace, size-capped.

Files land in ``<workspace>/attachments/slack/<YYYY-MM-DD>/<channel>-<ts>-<file id><.ext>``:
a generated name (the sender's name is kept only as ``Attachment.filename``), the same for
every redelivery of the message, written through a temporary file and a rename.

The bot token is sent only to Slack's file host (``files.slack.com``) or the host of the
configured API base URL: a file URL in an event is data, and must not be able to collect
our token. A file over ``max_attachment_bytes`` (by its stated size, or while streaming)
or one that cannot be fetched reaches the agent as a note, never silently dropped.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp

from channels.slack.convert import FileRef, file_kind
from gateway.core.messages import Attachment, InboundMessage
from gateway.core.system.bodies import read_capped
from gateway.core.system.fileutil import write_atomic

log = logging.getLogger(__name__)

_SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,10}$")
_SAFE = re.compile(r"[^A-Za-z0-9_-]")


class TooLarge(Exception):
    pass


class MediaStore:
    def __init__(
        self, workspace_dir: Path, *, token: str, api_base_url: str, max_bytes: int
    ) -> None:
        self.root = workspace_dir / "attachments" / "slack"
        self.max_bytes = max_bytes
        self._token = token
        self._hosts = {"files.slack.com", urlsplit(api_base_url).hostname or ""}
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def fetch(
        self, msg: InboundMessage, files: tuple[FileRef, ...]
    ) -> tuple[Attachment, ...]:
        day = msg.received_at.strftime("%Y-%m-%d")
        stem = _SAFE.sub("_", msg.platform_message_id)
        return tuple([await self._fetch_one(ref, self.root / day, stem) for ref in files])

    async def _fetch_one(self, ref: FileRef, folder: Path, stem: str) -> Attachment:
        described = Attachment(
            kind=file_kind(ref.mime_type, ref.subtype),
            mime_type=ref.mime_type,
            filename=ref.name,
            size=ref.size,
            platform_file_id=ref.id,
        )
        if ref.size is not None and ref.size > self.max_bytes:
            note = f"not stored: {ref.size} bytes is over the {self.max_bytes} byte limit"
            return replace(described, note=note)
        if not ref.url or urlsplit(ref.url).hostname not in self._hosts:
            return replace(described, note="not stored: the file is not on Slack's file host")
        suffix = match.group(0).lower() if (match := _SUFFIX.search(ref.name)) else ""
        path = folder / f"{stem}-{_SAFE.sub('_', ref.id)}{suffix}"
        try:
            data = await self._download(ref.url)
        except TooLarge:
            return replace(described, note=f"not stored: over the {self.max_bytes} byte limit")
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.warning("slack: could not download file %s: %s", ref.id, exc)
            return replace(described, note=f"could not be downloaded: {exc}")
        await asyncio.to_thread(write_atomic, path, data)
        return replace(described, path=str(path), size=len(data))

    async def _download(self, url: str) -> bytes:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120))
        headers = {"Authorization": f"Bearer {self._token}"}
        async with self._session.get(url, headers=headers) as response:
            response.raise_for_status()
            if "text/html" in response.headers.get("Content-Type", ""):
                # Slack answers a missing files:read scope with its sign-in page, not an error.
                raise aiohttp.ClientError("got a web page, not the file (is files:read granted?)")
            data = await read_capped(response.content, self.max_bytes)
        if data is None:
            raise TooLarge
        return data
