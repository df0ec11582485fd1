"""An MCP tool result as the model sees it: outside content, wrapped and marked untrusted.

Text is kept; pictures are saved to a file and handed to vision-capable models; embedded
resources show their text (binary ones are named, not shown); audio is named. The executor
then caps the length (head and tail kept, with a note) and redacts secrets.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from pathlib import Path

import mcp_types as types

from agent.llm.images import MAX_IMAGE_BYTES
from agent.llm.types import ImagePart
from agent.tools.base import ToolResult
from agent.untrusted import wrap_untrusted

_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
}


class ImageStore:
    """Pictures from MCP tools, one file per distinct picture (named by its hash)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def save(self, data: bytes, mime_type: str) -> Path:
        """Blocking: call from a worker thread."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        digest = hashlib.sha256(data).hexdigest()[:32]
        path = self.directory / f"{digest}{_EXTENSIONS.get(mime_type, '.bin')}"
        if not path.exists():
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
        return path


def convert(result: types.CallToolResult, *, source: str, images: ImageStore | None) -> ToolResult:
    """``source`` names the tool in the untrusted-content markers."""
    parts: list[str] = []
    pictures: list[ImagePart] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent):
            parts.append(_picture(block, images, pictures))
        elif isinstance(block, types.AudioContent):
            parts.append(f"[audio ({block.mime_type}), not shown]")
        elif isinstance(block, types.EmbeddedResource):
            parts.append(_resource(block.resource))
        elif isinstance(block, types.ResourceLink):
            about = f": {block.description}" if block.description else ""
            parts.append(f"[resource link {block.uri} ({block.name}){about}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, indent=1))
    text = "\n".join(parts) or "(the tool returned nothing)"
    return ToolResult(
        wrap_untrusted(f"output of {source}", text),
        is_error=result.is_error,
        untrusted=True,
        images=tuple(pictures),
    )


def _picture(block: types.ImageContent, images: ImageStore | None, into: list[ImagePart]) -> str:
    try:
        data = base64.b64decode(block.data, validate=True)
    except (binascii.Error, ValueError):
        return "[a picture that could not be decoded]"
    if images is None or not block.mime_type.startswith("image/"):
        return f"[picture ({block.mime_type}), not shown]"
    if len(data) > MAX_IMAGE_BYTES:
        return f"[picture ({block.mime_type}, {len(data)} bytes), too large to show]"
    into.append(ImagePart(str(images.save(data, block.mime_type)), block.mime_type))
    return f"[picture ({block.mime_type}) attached]"


def _resource(resource: types.TextResourceContents | types.BlobResourceContents) -> str:
    if isinstance(resource, types.TextResourceContents):
        return f"[resource {resource.uri}]\n{resource.text}"
    size = len(resource.blob) * 3 // 4
    return f"[resource {resource.uri} ({resource.mime_type or 'binary'}, about {size} bytes), not shown]"
