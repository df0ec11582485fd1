"""Attachments: inbound files into the workspace (size-capped, safe names), outbound files read.

Inbound files go to ``workspace/attachments/email/<YYYY-MM-DD>/`` under a generated name,
``<8 hex>-<name>`` (the sender's filename is only a hint: path separators, dots and control
characters are stripped; ``send_email`` sends such a file on as ``<name>``), written with ``O_EXCL | O_NOFOLLOW`` so nothing existing is overwritten.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from channels.email.parse import MailFile as InboundFile
from gateway.core.errors import ChannelPermanentError
from gateway.core.messages import Attachment, AttachmentKind
from gateway.core.messages import kind_of as mime_kind
from gateway.core.system.mail import MailFile, stored_name

VISION_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


def kind_of(mime_type: str) -> AttachmentKind:
    """Images the models can look at are images; other pictures (SVG, TIFF) are documents."""
    if mime_type in VISION_TYPES:
        return "image"
    kind = mime_kind(mime_type)
    return "document" if kind == "image" else kind


def safe_filename(name: str) -> str:
    base = re.split(r"[\\/]", name)[-1]
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", base).strip("._") or "attachment"
    stem, dot, ext = base.rpartition(".")
    if dot and len(ext) <= 10:
        return f"{stem[:60]}.{ext}"
    return base[:70]


def store_files(
    files: Iterable[InboundFile], *, workspace: Path, limit: int, today: str | None = None
) -> tuple[Attachment, ...]:
    directory = (
        workspace / "attachments" / "email" / (today or datetime.now(UTC).date().isoformat())
    )
    stored: list[Attachment] = []
    for item in files:
        name = safe_filename(item.filename)
        kind = kind_of(item.mime_type)
        size = len(item.data)
        if size > limit:
            stored.append(
                Attachment(
                    kind,
                    None,
                    item.mime_type,
                    name,
                    size,
                    note=f"not stored: larger than the {limit}-byte limit",
                )
            )
            continue
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / stored_name(name)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(item.data)
        relative = path.relative_to(workspace)
        stored.append(
            Attachment(
                kind, str(path), item.mime_type, name, size, note=f"workspace path {relative}"
            )
        )
    return tuple(stored)


def remove_stored(attachments: Iterable[Attachment]) -> None:
    for attachment in attachments:
        if attachment.path:
            Path(attachment.path).unlink(missing_ok=True)


def read_outbound(attachments: Sequence[Attachment], *, limit: int) -> list[MailFile]:
    """Files for an outgoing reply; the agent side already confined the paths."""
    files: list[MailFile] = []
    budget = limit
    for attachment in attachments:
        if not attachment.path:
            continue
        path = Path(attachment.path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ChannelPermanentError(f"attachment {path.name} is unreadable: {exc}") from exc
        budget -= len(data)
        if budget < 0:
            raise ChannelPermanentError(f"attachments exceed the {limit}-byte limit")
        files.append(MailFile(attachment.filename or path.name, data, attachment.mime_type or ""))
    return files
