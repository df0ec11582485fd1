"""Reading images for vision models (shared by both providers)."""

from __future__ import annotations

import base64
from pathlib import Path

from agent.llm.types import ImagePart

MAX_IMAGE_BYTES = 5 * 1024 * 1024


def image_base64(part: ImagePart) -> str | None:
    """The image's bytes as base64, or ``None`` when it is missing or too large."""
    path = Path(part.path)
    try:
        if path.stat().st_size > MAX_IMAGE_BYTES:
            return None
        return base64.b64encode(path.read_bytes()).decode("ascii")
    except OSError:
        return None
