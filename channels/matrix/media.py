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
from dataclasses import replace
from pathlib import Path

from nio import AsyncClient, MemoryDownloadResponse

from channels._files import NOT_DOWNLOADED, file_path, file_suffix, over_limit
from channels.matrix.convert import FileRef
from gateway.core.messages import Attachment, InboundMessage
from gateway.core.system.fileutil import write_atomic

log = logging.getLogger(__name__)


class MediaStore:
    def __init__(self, client: AsyncClient, root: Path, *, max_bytes: int) -> None:
        self._client = client
        self.root = root
        self.max_bytes = max_bytes

    async def fetch(
        self, message: InboundMessage, files: tuple[FileRef, ...], *, download: bool
    ) -> tuple[Attachment, ...]:
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
                found.append(replace(described, note=NOT_DOWNLOADED))
            elif ref.size is not None and ref.size > self.max_bytes:
                found.append(replace(described, note=over_limit(self.max_bytes, ref.size)))
            else:
                path = file_path(self.root, message, index, file_suffix(ref.name, ref.mime_type))
                found.append(await self._download(ref, described, path))
        return tuple(found)

    async def _download(self, ref: FileRef, described: Attachment, path: Path) -> Attachment:
        try:
            answer = await self._client.download(mxc=ref.url)
        except (OSError, TimeoutError, ValueError) as exc:
            return replace(described, note=f"could not be downloaded: {exc}")
        if not isinstance(answer, MemoryDownloadResponse):
            log.warning("matrix: could not download %s: %s", ref.url, answer)
            return replace(described, note=f"could not be downloaded: {answer}")
        data = answer.body
        if len(data) > self.max_bytes:
            return replace(described, note=over_limit(self.max_bytes))
        await asyncio.to_thread(write_atomic, path, data)
        return replace(described, path=str(path), size=len(data))
