"""Inbound Signal files: fetched from signal-cli (``getAttachment``, base64), size-capped.

signal-cli has already downloaded and decrypted them into its own data directory; asking
for them over JSON-RPC works wherever signal-cli runs (another container, another host).
Files land in ``<workspace>/attachments/signal/<YYYY-MM-DD>/<message>-<n><.ext>``: a
generated name, the same for every replay of the message, written through a temporary file.
Images go to vision models, voice notes (``kind="voice"``) and audio to the voice service,
documents are read; a file too large or that cannot be fetched reaches the agent as a
note, and files of messages the gate would refuse are not fetched at all.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from dataclasses import replace
from pathlib import Path

from channels._files import NOT_DOWNLOADED, file_path, file_suffix, over_limit
from channels.signal.convert import FileRef
from channels.signal.rpc import RpcError, SignalRpc, Unreachable
from gateway.core.messages import Attachment, InboundMessage
from gateway.core.system.fileutil import write_atomic

log = logging.getLogger(__name__)


class MediaStore:
    def __init__(self, rpc: SignalRpc, root: Path, *, max_bytes: int) -> None:
        self._rpc = rpc
        self.root = root
        self.max_bytes = max_bytes

    async def fetch(
        self,
        message: InboundMessage,
        files: tuple[FileRef, ...],
        *,
        download: bool,
        group_id: str | None,
    ) -> tuple[Attachment, ...]:
        found = []
        for index, ref in enumerate(files):
            described = Attachment(
                kind=ref.kind,
                mime_type=ref.mime_type,
                filename=ref.name,
                size=ref.size,
                platform_file_id=ref.id,
            )
            if not download:
                found.append(replace(described, note=NOT_DOWNLOADED))
            elif ref.size is not None and ref.size > self.max_bytes:
                found.append(replace(described, note=over_limit(self.max_bytes, ref.size)))
            else:
                path = file_path(self.root, message, index, file_suffix(ref.name, ref.mime_type))
                found.append(await self._download(ref, described, path, message, group_id))
        return tuple(found)

    async def _download(
        self,
        ref: FileRef,
        described: Attachment,
        path: Path,
        message: InboundMessage,
        group_id: str | None,
    ) -> Attachment:
        where = {"groupId": group_id} if group_id else {"recipient": message.sender_id}
        try:
            answer = await self._rpc.call("getAttachment", {"id": ref.id, **where})
            encoded = answer.get("data") if isinstance(answer, dict) else answer
            data = base64.b64decode(str(encoded or ""), validate=True)
        except (RpcError, Unreachable, binascii.Error, ValueError) as exc:
            log.warning("signal: could not fetch attachment %s: %s", ref.id, exc)
            return replace(described, note=f"could not be downloaded: {exc}")
        if len(data) > self.max_bytes:
            return replace(described, note=over_limit(self.max_bytes))
        await asyncio.to_thread(write_atomic, path, data)
        return replace(described, path=str(path), size=len(data))
