"""Inbound Matrix files: downloaded from the homeserver (authenticated media), size-capped.

Files land in ``<workspace>/attachments/matrix/<YYYY-MM-DD>/<event id>-<n><.ext>``: a
generated name, the same for every replay of the event, written through a temporary file.
Voice messages (MSC3245) arrive as ``kind="voice"``, other audio as ``"audio"``, files as
``"document"``, images as ``"image"`` (for vision models). A file that is too large or
cannot be fetched reaches the agent as a note; files of messages the gate would refuse
are not downloaded at all.
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import re
from dataclasses import replace
from pathlib import Path

from nio import AsyncClient, MemoryDownloadResponse

from channels.matrix.convert import FileRef
from gateway.core.messages import Attachment, InboundMessage
from gateway.core.system.fileutil import write_atomic

log = logging.getLogger(__name__)

_SAFE = re.compile(r"[^A-Za-z0-9_-]")
_SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,10}$")


class MediaStore:
    def __init__(self, client: AsyncClient, root: Path, *, max_bytes: int) -> None:
        self._client = client
        self.root = root
        self.max_bytes = max_bytes

    async def fetch(
        self, message: InboundMessage, files: tuple[FileRef, ...], *, download: bool
    ) -> tuple[Attachment, ...]:
        folder = self.root / message.received_at.strftime("%Y-%m-%d")
        stem = _SAFE.sub("_", message.platform_message_id)[-60:]
        found = []
        for index, ref in enumerate(files):
            described = Attachment(
                kind=ref.kind,
                mime_type=ref.mime_type,
                filename=ref.name,
                size=ref.size,
                platform_file_id=ref.url,
            )
            if not download:
                found.append(replace(described, note="not downloaded"))
            elif ref.size is not None and ref.size > self.max_bytes:
                note = f"not stored: {ref.size} bytes is over the {self.max_bytes} byte limit"
                found.append(replace(described, note=note))
            else:
                found.append(await self._download(ref, described, folder / f"{stem}-{index}"))
        return tuple(found)

    async def _download(self, ref: FileRef, described: Attachment, stem: Path) -> Attachment:
        try:
            answer = await self._client.download(mxc=ref.url)
        except (OSError, TimeoutError, ValueError) as exc:
            return replace(described, note=f"could not be downloaded: {exc}")
        if not isinstance(answer, MemoryDownloadResponse):
            log.warning("matrix: could not download %s: %s", ref.url, answer)
            return replace(described, note=f"could not be downloaded: {answer}")
        data = answer.body
        if len(data) > self.max_bytes:
            return replace(described, note=f"not stored: over the {self.max_bytes} byte limit")
        suffix = _suffix(ref)
        path = stem.with_name(stem.name + suffix)
        await asyncio.to_thread(write_atomic, path, data)
        return replace(described, path=str(path), size=len(data))


def _suffix(ref: FileRef) -> str:
    if match := _SUFFIX.search(ref.name):
        return match.group(0).lower()
    mime = (ref.mime_type or "").split(";", 1)[0].strip()
    return (mimetypes.guess_extension(mime) if mime else None) or ".bin"
