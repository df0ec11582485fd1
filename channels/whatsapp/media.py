"""Inbound WhatsApp files: looked up by media id, fetched with the token, size-capped.

Files land in ``<workspace>/attachments/whatsapp/<YYYY-MM-DD>/<message id>-<n><.ext>``: a
generated name (the sender's file name is kept only as ``Attachment.filename``), the same
for every redelivery, written through a temporary file and a rename. Voice notes arrive as
``kind="voice"`` (the shared transcription reads them), documents as ``"document"``, and
images go to vision models. A file that is too large or cannot be fetched reaches the
agent as a note, never silently dropped.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path

from channels._files import NOT_DOWNLOADED, file_path, file_suffix, over_limit
from channels.whatsapp.convert import Converted, MediaRef
from channels.whatsapp.graph import GraphClient, GraphError, GraphUnreachable
from gateway.core.messages import Attachment
from gateway.core.system.fileutil import write_atomic

log = logging.getLogger(__name__)

_DEFAULT_SUFFIX = {"image": ".jpg", "voice": ".ogg", "audio": ".mp3", "video": ".mp4"}
_KNOWN = {"audio/ogg": ".ogg", "image/jpeg": ".jpg", "audio/mpeg": ".mp3", "image/webp": ".webp"}


class MediaStore:
    def __init__(self, graph: GraphClient, root: Path, *, max_bytes: int) -> None:
        self._graph = graph
        self.root = root
        self.max_bytes = max_bytes

    async def attach(self, converted: Converted, *, download: bool) -> tuple[Attachment, ...]:
        """The message's files, stored when ``download`` (the gate would admit the message)."""
        message = converted.message
        found = []
        for index, ref in enumerate(converted.media):
            described = Attachment(
                kind=ref.kind,
                mime_type=ref.mime_type,
                filename=ref.filename,
                platform_file_id=ref.media_id,
            )
            if not download:
                found.append(replace(described, note=NOT_DOWNLOADED))
                continue
            suffix = file_suffix(
                ref.filename,
                ref.mime_type,
                known=_KNOWN,
                default=_DEFAULT_SUFFIX.get(ref.kind, ".bin"),
            )
            path = file_path(self.root, message, index, suffix)
            found.append(await self._fetch(ref, described, path))
        return tuple(found)

    async def _fetch(self, ref: MediaRef, described: Attachment, path: Path) -> Attachment:
        try:
            info = await self._graph.media_info(ref.media_id)
            size = info.get("file_size")
            if isinstance(size, int) and size > self.max_bytes:
                return replace(described, size=size, note=over_limit(self.max_bytes, size))
            data = await self._graph.download(str(info.get("url") or ""), self.max_bytes)
        except (GraphError, GraphUnreachable, OSError, TimeoutError) as exc:
            log.warning("whatsapp: could not fetch media %s: %s", ref.media_id, exc)
            return replace(described, note=f"could not be downloaded: {exc}")
        if data is None:
            return replace(described, note=over_limit(self.max_bytes))
        await asyncio.to_thread(write_atomic, path, data)
        return replace(described, path=str(path), size=len(data))
