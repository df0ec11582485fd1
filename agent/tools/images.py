"""The ``generate_image`` tool: a picture made by the images endpoint of ``[images]``.

The endpoint is OpenAI's ``/v1/images/generations`` (or a server that speaks it). The
picture comes back as base64 (gpt-image-1) or as an address to fetch at once (dall-e-3);
it is stored with the other files from outside (``attachments/images/``) and goes to the
user with the turn's answer, as a photo where the channel has them. Each picture is
counted in the turn's usage (``Purpose.IMAGE``, priced by ``images.price_per_image``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from agent.llm.types import Usage
from agent.tools.base import Effect, Tool, ToolContext, ToolError, ToolResult, schema
from agent.workspace import ATTACHMENTS
from gateway.config.integrations import ImagesSettings
from gateway.core.messages import Attachment
from gateway.core.system.bodies import read_capped
from gateway.core.usage import Purpose

OPENAI_URL = "https://api.openai.com/v1"
IMAGE_INTENT = ("image", "picture", "photo", "draw", "drawing", "illustration", "generate")
_KINDS = (
    (b"\x89PNG\r\n\x1a\n", "image/png", ".png"),
    (b"\xff\xd8\xff", "image/jpeg", ".jpg"),
    (b"GIF8", "image/gif", ".gif"),
)


class ImagesError(Exception):
    """The images endpoint made no picture; the message says why."""


@dataclass(frozen=True, slots=True)
class Picture:
    data: bytes
    mime_type: str
    suffix: str


class ImagesEndpoint:
    """An OpenAI-compatible ``/images/generations`` (``[images]``)."""

    def __init__(self, settings: ImagesSettings) -> None:
        self.settings = settings
        self._url = (settings.base_url or OPENAI_URL).rstrip("/") + "/images/generations"

    async def generate(self, prompt: str, size: str) -> Picture:
        settings = self.settings
        headers = {}
        if settings.api_key is not None and settings.api_key.get_secret_value():
            headers["Authorization"] = f"Bearer {settings.api_key.get_secret_value()}"
        body = {"model": settings.model, "prompt": prompt, "n": 1, "size": size}
        timeout = aiohttp.ClientTimeout(total=settings.timeout_seconds)
        try:
            async with aiohttp.ClientSession(headers=headers, timeout=timeout) as http:
                async with http.post(self._url, json=body) as response:
                    answer = await _json(response)
                    if response.status != 200:
                        raise ImagesError(f"HTTP {response.status}: {_message(answer)}")
                item = _first(answer)
                if isinstance(item.get("b64_json"), str):
                    data = _decoded(item["b64_json"], settings.max_bytes)
                elif isinstance(item.get("url"), str):
                    data = await _download(http, item["url"], settings.max_bytes)
                else:
                    raise ImagesError("the answer holds no picture (no b64_json or url)")
        except (aiohttp.ClientError, TimeoutError) as exc:
            reason = str(exc) or type(exc).__name__
            raise ImagesError(f"cannot reach the images endpoint {self._url}: {reason}") from None
        for magic, mime_type, suffix in _KINDS:
            if data.startswith(magic):
                return Picture(data, mime_type, suffix)
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            return Picture(data, "image/webp", ".webp")
        raise ImagesError(
            "the endpoint sent something that is not a PNG, JPEG, GIF or WebP picture"
        )


async def _json(response: aiohttp.ClientResponse) -> dict[str, Any]:
    try:
        answer = await response.json(content_type=None)
    except (ValueError, aiohttp.ContentTypeError):
        return {}
    return answer if isinstance(answer, dict) else {}


def _message(answer: dict[str, Any]) -> str:
    error = answer.get("error")
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])[:500]
    return "no reason given"


def _first(answer: dict[str, Any]) -> dict[str, Any]:
    data = answer.get("data")
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        raise ImagesError("the answer holds no picture")
    return data[0]


def _decoded(text: str, limit: int) -> bytes:
    if len(text) > limit * 4 // 3 + 4:
        raise ImagesError(f"the picture is larger than images.max_bytes ({limit})")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ImagesError("the picture's base64 is broken") from None


async def _download(http: aiohttp.ClientSession, url: str, limit: int) -> bytes:
    async with http.get(url) as response:
        if response.status != 200:
            raise ImagesError(f"fetching the picture answered HTTP {response.status}")
        data = await read_capped(response.content, limit)
    if data is None:
        raise ImagesError(f"the picture is larger than images.max_bytes ({limit})")
    return data


class GenerateImage(Tool):
    name = "generate_image"
    description = "Make a picture from a description; the user gets it with your answer."
    parameters = schema(
        {
            "prompt": {"type": "string", "minLength": 1, "maxLength": 4000},
            "size": {
                "type": "string",
                "pattern": r"^(auto|\d{2,5}x\d{2,5})$",
                "description": "WIDTHxHEIGHT, e.g. 1024x1024",
            },
        },
        ("prompt",),
    )
    effect = Effect.REMOTE  # costs money at another service
    intent = IMAGE_INTENT  # a hint for the approver (agent.policy)
    does = "makes a picture at the images service (which may cost money)"

    def __init__(self, endpoint: ImagesEndpoint) -> None:
        self._endpoint = endpoint

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        settings = self._endpoint.settings
        prompt = str(args["prompt"]).strip()
        try:
            picture = await self._endpoint.generate(prompt, str(args.get("size") or settings.size))
        except ImagesError as exc:
            raise ToolError(f"no picture was made: {exc}") from None
        ctx.state.meter.add(Purpose.IMAGE, settings.model, Usage(cost_usd=settings.cost(1)))
        image = await save_picture(ctx.workspace.root, prompt, picture)
        where = ctx.workspace.relative(Path(image.path or ""))
        return ToolResult(
            f"The picture is made ({where}); the user receives it with your answer. Do not "
            "describe it at length.",
            files=(image,),
        )


async def save_picture(workspace: Path, prompt: str, picture: Picture) -> Attachment:
    """Store a made picture with the other files from outside (``attachments/images/``)."""
    slug = re.sub(r"[^a-z0-9]+", "-", prompt.lower()).strip("-")[:40] or "picture"
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    name = f"{slug}-{secrets.token_hex(4)}{picture.suffix}"
    path = workspace / ATTACHMENTS / "images" / day / name

    def write() -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(picture.data)

    await asyncio.to_thread(write)
    return Attachment(
        "image",
        path=str(path),
        mime_type=picture.mime_type,
        filename=name,
        size=len(picture.data),
        note=prompt[:200],
    )
