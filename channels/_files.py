"""What the channels that fetch inbound files themselves (WhatsApp, Matrix, Signal) share:
where a file is stored, its suffix, and the notes of files that were not stored.

A file lands in ``<root>/<YYYY-MM-DD>/<message id>-<n><.ext>``: a generated name (the
sender's file name is kept only as ``Attachment.filename``), the same for every redelivery
of the message, so a replay overwrites rather than adds.
"""

from __future__ import annotations

import mimetypes
import re
from collections.abc import Mapping
from pathlib import Path

from gateway.core.messages import InboundMessage

_SAFE = re.compile(r"[^A-Za-z0-9_-]")
_SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,10}$")

NOT_DOWNLOADED = "not downloaded"  # the gate would refuse the message: its files stay away


def file_path(root: Path, message: InboundMessage, index: int, suffix: str) -> Path:
    """Where the message's ``index``-th file is stored."""
    stem = _SAFE.sub("_", message.platform_message_id)[-60:]
    return root / message.received_at.strftime("%Y-%m-%d") / f"{stem}-{index}{suffix}"


def file_suffix(
    name: str | None, mime_type: str | None, *, known: Mapping[str, str] = {}, default: str = ".bin"
) -> str:
    """The suffix of the sender's file name; else one for its MIME type; else ``default``."""
    if name and (match := _SUFFIX.search(name)):
        return match.group(0).lower()
    mime = (mime_type or "").split(";", 1)[0].strip()
    return known.get(mime) or (mimetypes.guess_extension(mime) if mime else None) or default


def over_limit(max_bytes: int, size: int | None = None) -> str:
    """The note of a file too large to store (its size where the platform said it)."""
    if size is None:
        return f"not stored: over the {max_bytes} byte limit"
    return f"not stored: {size} bytes is over the {max_bytes} byte limit"
