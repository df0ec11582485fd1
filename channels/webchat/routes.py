"""The web chat's HTTP endpoints: the page's socket, sending messages, fetching files.

They sit behind the gateway web server's guard (authentication, Host and Origin checks),
so every request here is the owner's, in the owner's one conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from aiohttp import BodyPartReader, WSMsgType, web

from channels.webchat.render import public
from channels.webchat.subscriber import Subscriber
from channels.webchat.transcript import Entry
from channels.webchat.uploads import TooLarge, read_field, save_part
from gateway.core.bus import Accepted
from gateway.core.errors import ChannelTransientError, StorageFullError
from gateway.core.messages import Attachment
from gateway.core.webhost import WEB_SOCKET_PROTOCOL, Prepare

MAX_TEXT_BYTES = 100_000
CLIENT_ID_RE = re.compile(r"[A-Za-z0-9_-]{8,64}")
INLINE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


# Every signed-in browser is the owner (gateway.web.access.security), so they share one
# conversation: the page on the phone and on the desk show the same chat, `webchat:owner`
# (the address a webhook's ``deliver_to`` or ``heartbeat.target`` can name).
OWNER_CHAT = "owner"


class BadForm(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(slots=True)
class Form:
    text: str = ""
    client_id: str | None = None
    attachments: list[Attachment] = field(default_factory=list)


class ChatBackend(Protocol):
    """What the endpoints need of the channel (:class:`channels.webchat.adapter.WebChatChannel`)."""

    @property
    def workspace_dir(self) -> Path: ...
    @property
    def upload_dir(self) -> Path: ...
    @property
    def max_files(self) -> int: ...
    @property
    def max_attachment_bytes(self) -> int: ...

    async def submit(
        self,
        chat_id: str,
        text: str,
        *,
        client_id: str,
        attachments: Sequence[Attachment] = (),
    ) -> tuple[Accepted, Entry | None]: ...

    async def subscribe(self, chat_id: str) -> tuple[Subscriber, dict[str, Any]]: ...

    def unsubscribe(self, chat_id: str, subscriber: Subscriber) -> None: ...

    async def file_for(self, chat_id: str, entry: str, index: int) -> Entry | None: ...


def routes(channel: ChatBackend, prepare: Prepare) -> list[web.RouteDef]:
    handlers = ChatRoutes(channel, prepare)
    return [
        web.get("/api/chat/socket", handlers.socket),
        web.post("/api/chat/messages", handlers.send),
        web.get("/api/chat/files/{entry}/{index}", handlers.download),
    ]


class ChatRoutes:
    def __init__(self, channel: ChatBackend, prepare: Prepare) -> None:
        self._channel = channel
        self._prepare = prepare

    async def socket(self, request: web.Request) -> web.StreamResponse:
        """Live events for one page; starts with a snapshot, so nothing falls in a gap."""
        chat_id = OWNER_CHAT
        sock = web.WebSocketResponse(
            heartbeat=25.0, max_msg_size=4096, protocols=(WEB_SOCKET_PROTOCOL,)
        )
        self._prepare(request, sock)  # security headers go with the 101
        await sock.prepare(request)
        subscriber, hello = await self._channel.subscribe(chat_id)
        pump = asyncio.create_task(_pump(subscriber, sock))
        try:
            await sock.send_json(hello)
            async for message in sock:  # the page sends nothing but pings and close
                if message.type == WSMsgType.ERROR:
                    break
        finally:
            self._channel.unsubscribe(chat_id, subscriber)
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump
        return sock

    async def send(self, request: web.Request) -> web.StreamResponse:
        chat_id = OWNER_CHAT
        if not request.content_type.startswith("multipart/"):
            return _error(415, "send multipart/form-data")
        form = Form()
        try:
            await self._read_form(request, form)
        except BadForm as exc:
            await _discard(form.attachments)
            return _error(exc.status, str(exc))
        try:
            accepted, entry = await self._channel.submit(
                chat_id, form.text, client_id=str(form.client_id), attachments=form.attachments
            )
        except StorageFullError:
            await _discard(form.attachments)
            return _error(507, "the gateway's disk is full; try again later")
        except ChannelTransientError as exc:
            await _discard(form.attachments)
            return _error(503, str(exc))
        return web.json_response(
            {"status": accepted.value, "entry": public(entry) if entry else None}
        )

    async def _read_form(self, request: web.Request, form: Form) -> None:
        channel = self._channel
        try:
            reader = await request.multipart()
            while (part := await reader.next()) is not None:
                if not isinstance(part, BodyPartReader):
                    raise BadForm(400, "nested multipart is not accepted")
                if part.name == "text":
                    form.text = await read_field(part, limit=MAX_TEXT_BYTES, what="the text")
                elif part.name == "id":
                    form.client_id = (await read_field(part, limit=200)).strip()
                elif part.name in ("file", "voice") and part.filename is not None:
                    if len(form.attachments) >= channel.max_files:
                        raise BadForm(413, f"at most {channel.max_files} files per message")
                    form.attachments.append(
                        await save_part(
                            part,
                            channel.upload_dir,
                            limit=channel.max_attachment_bytes,
                            recorded=part.name == "voice",  # the record button's
                        )
                    )
        except TooLarge as exc:
            raise BadForm(413, str(exc)) from exc
        if not form.text.strip() and not form.attachments:
            raise BadForm(400, "empty message")
        if form.client_id is None or not CLIENT_ID_RE.fullmatch(form.client_id):
            raise BadForm(400, "missing or malformed message id")

    async def download(self, request: web.Request) -> web.StreamResponse:
        """A file of the owner's transcript (uploads and files the agent sent)."""
        chat_id = OWNER_CHAT
        try:
            index = int(request.match_info["index"])
        except ValueError:
            return _error(404, "no such file")
        found = await self._channel.file_for(chat_id, request.match_info["entry"], index)
        if found is None:
            return _error(404, "no such file")
        path = Path(str(found.get("path") or ""))
        if not await asyncio.to_thread(_servable, path, self._channel.workspace_dir):
            return _error(404, "no such file")
        mime = str(found.get("mime") or "")
        inline = mime in INLINE_TYPES  # never HTML or SVG: they could run script here
        name = str(found.get("name") or "file")
        safe = "".join(ch for ch in name if ch.isalnum() or ch in "._- ")[:100] or "file"
        return web.FileResponse(
            path,
            headers={
                "Content-Type": mime if inline else "application/octet-stream",
                "Content-Disposition": f'{"inline" if inline else "attachment"}; filename="{safe}"',
            },
        )


async def _pump(subscriber: Subscriber, sock: web.WebSocketResponse) -> None:
    while (event := await subscriber.queue.get()) is not None:
        await sock.send_json(event)
    await sock.close(code=1001, message=b"resync")  # closed or fell behind: reload state


def _servable(path: Path, workspace: Path) -> bool:
    """Only regular files inside the workspace (inbound uploads and the agent's files)."""
    try:
        resolved = path.resolve(strict=True)
    except OSError:
        return False
    return resolved.is_file() and resolved.is_relative_to(workspace.resolve())


async def _discard(attachments: list[Attachment]) -> None:
    for attachment in attachments:
        if attachment.path:
            await asyncio.to_thread(Path(attachment.path).unlink, missing_ok=True)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)
