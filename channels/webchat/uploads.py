"""Files attached in the web chat: streamed to disk under a size cap.

They go to ``workspace/attachments/webchat/<YYYY-MM-DD>/`` with a generated name (the
browser's file name is kept only as a label), so nothing the browser sends chooses a path.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from datetime import date
from pathlib import Path
from typing import BinaryIO

from aiohttp import BodyPartReader

from gateway.core.messages import Attachment, AttachmentKind

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
CHUNK = 256 * 1024
_SUFFIX_RE = re.compile(r"\.[A-Za-z0-9]{1,8}")


def human_size(size: int) -> str:
    """``100_000`` → ``"100 kB"``, ``20_000_000`` → ``"20 MB"``, ``999`` → ``"999 bytes"``."""
    for unit, factor in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size >= factor:
            return f"{size / factor:.3g} {unit}"
    return f"{size} bytes"


class TooLarge(Exception):
    """An upload or a text field exceeded its cap; nothing of it is kept."""

    def __init__(self, limit: int, what: str = "a file") -> None:
        super().__init__(f"{what} is larger than {human_size(limit)}")
        self.limit = limit


def display_name(raw: str | None) -> str:
    name = (raw or "file").replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if ch.isprintable()).strip() or "file"
    return name[:120]


def stored_name(label: str) -> str:
    suffix = Path(label).suffix
    return uuid.uuid4().hex + (suffix.lower() if _SUFFIX_RE.fullmatch(suffix) else "")


async def save_part(
    part: BodyPartReader, root: Path, *, limit: int, recorded: bool = False
) -> Attachment:
    """Write one multipart file part to disk; raise :class:`TooLarge` past ``limit`` bytes.
    ``recorded``: the chat's record button made it, so a recording is a voice note (answered
    aloud with ``voice.reply = "auto"``), not an audio file."""
    label = display_name(part.filename)
    mime = (part.headers.get("Content-Type") or "application/octet-stream").split(";")[0]
    directory = root / date.today().isoformat()
    await asyncio.to_thread(directory.mkdir, parents=True, exist_ok=True)
    path = directory / stored_name(label)
    handle = await asyncio.to_thread(path.open, "wb")
    try:
        size = await _copy(part, handle, limit)
    except BaseException:
        await asyncio.to_thread(handle.close)
        await asyncio.to_thread(path.unlink, missing_ok=True)
        raise
    await asyncio.to_thread(handle.close)
    kind = _kind(mime.lower())
    return Attachment(
        kind="voice" if recorded and kind == "audio" else kind,
        path=str(path.resolve()),
        mime_type=mime.lower(),
        filename=label,
        size=size,
    )


async def _copy(part: BodyPartReader, handle: BinaryIO, limit: int) -> int:
    size = 0
    while chunk := await part.read_chunk(CHUNK):
        size += len(chunk)
        if size > limit:
            raise TooLarge(limit)
        await asyncio.to_thread(handle.write, chunk)
    return size


async def read_field(part: BodyPartReader, *, limit: int, what: str = "a form field") -> str:
    """A text form field, refusing more than ``limit`` bytes."""
    data = bytearray()
    while chunk := await part.read_chunk(CHUNK):
        data.extend(chunk)
        if len(data) > limit:
            raise TooLarge(limit, what)
    return data.decode("utf-8", errors="replace")


def _kind(mime: str) -> AttachmentKind:
    """A recording (audio/*) is transcribed like any channel's (gateway/runtime/intake/understanding.py)."""
    if mime in IMAGE_TYPES:
        return "image"
    return "audio" if mime.startswith("audio/") else "document"
