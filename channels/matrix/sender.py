"""Outbound delivery to Matrix: formatted parts, never doubled, errors typed; drafts edited.

**Exactly once per part.** Every part is sent with a transaction id derived from the
outbox's idempotency key and the part's index. The homeserver stores one event per
transaction id and device, and answers a repeat with the event it already has, so a send
retried after a timeout (or after a restart, with the same device) is not shown twice.

**Errors.** nio is configured not to wait on its own (no sleeping on 429, no retrying on
timeouts); ``M_LIMIT_EXCEEDED`` becomes :class:`ChannelRateLimited` with the server's
``retry_after_ms``, refusals (``M_FORBIDDEN``: not in the room, ``M_UNKNOWN_TOKEN``, ...)
are permanent, anything else is transient and the outbox retries.

**Drafts** (streaming by editing): a draft is an ``m.text`` event edited with ``m.replace``
while the answer grows; the final answer edits each draft into its formatted part, posts
the parts beyond them and redacts drafts left over.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import mimetypes
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from io import BytesIO
from pathlib import Path
from typing import Any

from nio import AsyncClient, ErrorResponse, UploadResponse
from nio.exceptions import LocalProtocolError
from nio.responses import RoomSendResponse

from channels.matrix import render
from gateway.core.errors import (
    ChannelError,
    ChannelPermanentError,
    ChannelRateLimited,
    ChannelTransientError,
)
from gateway.core.messages import Attachment, ChatRef, OutboundKind, OutboundMessage

log = logging.getLogger(__name__)

_PERMANENT = {
    "M_FORBIDDEN",
    "M_UNKNOWN_TOKEN",
    "M_MISSING_TOKEN",
    "M_NOT_FOUND",
    "M_BAD_JSON",
    "M_NOT_JSON",
    "M_TOO_LARGE",
    "M_INVALID_PARAM",
    "M_UNKNOWN",
}
_MAX_TRACKED = 2_000
_FILE_TYPES = {"image": "m.image", "audio": "m.audio", "voice": "m.audio", "video": "m.video"}


class Sender:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client
        # our newest event ids: a reply to one of them addresses the bot (its text is found
        # by the gateway, from the store)
        self.sent_events: OrderedDict[str, None] = OrderedDict()

    async def send(self, message: OutboundMessage, drafts: Sequence[str] = ()) -> str | None:
        """Deliver ``message``; with ``drafts``, edit them into its parts first."""
        msgtype = "m.notice" if message.kind is OutboundKind.NOTICE else "m.text"
        ids: list[str] = []
        texts = render.parts(message.text)
        for index, text in enumerate(texts):
            body = render.content(text, msgtype=msgtype)
            if index < len(drafts) and await self._edit(
                message.chat, drafts[index], body, txn=f"{message.idempotency_key}-e{index}"
            ):
                ids.append(drafts[index])
                continue
            body.update(self._relation(message, first=index == 0))
            ids.append(
                await self._send(message.chat_id, body, _txn(message.idempotency_key, index))
            )
        for offset, attachment in enumerate(message.attachments, start=len(texts)):
            body = await self._file_content(attachment)
            body.update(self._relation(message, first=False))
            ids.append(
                await self._send(message.chat_id, body, _txn(message.idempotency_key, offset))
            )
        for draft in drafts[len(texts) :]:
            await self.redact(message.chat, draft)
        return ",".join(ids) or None

    def _relation(self, message: OutboundMessage, *, first: bool) -> dict[str, Any]:
        if message.thread_id:
            return {
                "m.relates_to": {
                    "rel_type": "m.thread",
                    "event_id": message.thread_id,
                    "is_falling_back": True,
                    "m.in_reply_to": {"event_id": message.reply_to_message_id or message.thread_id},
                }
            }
        if first and message.reply_to_message_id:
            return {"m.relates_to": {"m.in_reply_to": {"event_id": message.reply_to_message_id}}}
        return {}

    # -- drafts ---------------------------------------------------------------------------

    async def post_draft(self, chat: ChatRef, text: str, *, reply_to: str | None) -> str:
        body = render.content(text, formatted=False)
        if chat.thread_id:
            body["m.relates_to"] = {
                "rel_type": "m.thread",
                "event_id": chat.thread_id,
                "is_falling_back": True,
                "m.in_reply_to": {"event_id": reply_to or chat.thread_id},
            }
        elif reply_to:
            body["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
        return await self._send(chat.chat_id, body, uuid.uuid4().hex)

    async def edit_draft(self, chat: ChatRef, event_id: str, text: str) -> None:
        body = render.content(text, formatted=False)
        if not await self._edit(chat, event_id, body, txn=uuid.uuid4().hex):
            raise ChannelPermanentError(f"draft {event_id} cannot be edited")

    async def redact(self, chat: ChatRef, event_id: str) -> None:
        try:
            answer = await self._client.room_redact(chat.chat_id, event_id, tx_id=uuid.uuid4().hex)
        except (OSError, TimeoutError, LocalProtocolError) as exc:
            raise ChannelTransientError(f"matrix: redaction failed: {exc}") from exc
        if isinstance(answer, ErrorResponse):
            log.info("matrix: draft %s not removed: %s", event_id, answer)

    async def _edit(self, chat: ChatRef, event_id: str, new: dict[str, Any], *, txn: str) -> bool:
        """Replace event ``event_id``'s content; False when it cannot be edited any more."""
        body = {
            "msgtype": new["msgtype"],
            "body": f"* {new['body']}",
            "m.new_content": new,
            "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
            "m.mentions": {},
        }
        try:
            await self._send(chat.chat_id, body, _txn(txn, 0))
        except ChannelPermanentError as exc:
            log.info("matrix: draft %s not edited (%s); posting the part anew", event_id, exc)
            return False
        return True

    # -- the wire -------------------------------------------------------------------------

    async def _send(self, room_id: str, body: dict[str, Any], txn: str) -> str:
        try:
            answer = await self._client.room_send(room_id, "m.room.message", body, tx_id=txn)
        except (OSError, TimeoutError, LocalProtocolError) as exc:
            raise ChannelTransientError(
                f"matrix: send failed: {exc or type(exc).__name__}"
            ) from exc
        if isinstance(answer, RoomSendResponse):
            self.sent_events[answer.event_id] = None
            while len(self.sent_events) > _MAX_TRACKED:
                self.sent_events.popitem(last=False)
            return str(answer.event_id)
        raise mapped(answer)

    async def _file_content(self, attachment: Attachment) -> dict[str, Any]:
        path = Path(attachment.path) if attachment.path else None
        name = attachment.filename or (path.name if path else attachment.kind)
        if path is None or not path.is_file():
            return render.content(f"[could not attach {name}: file not found]")
        data = await asyncio.to_thread(path.read_bytes)
        mime = attachment.mime_type or mimetypes.guess_type(name)[0] or "application/octet-stream"
        try:
            answer, _ = await self._client.upload(
                BytesIO(data), content_type=mime, filename=name, filesize=len(data)
            )
        except (OSError, TimeoutError) as exc:
            raise ChannelTransientError(f"matrix: upload failed: {exc}") from exc
        if not isinstance(answer, UploadResponse):
            raise mapped(answer)
        return {
            "msgtype": _FILE_TYPES.get(attachment.kind, "m.file"),
            "body": name,
            "filename": name,
            "url": answer.content_uri,
            "info": {"mimetype": mime, "size": len(data)},
            "m.mentions": {},
        }


def mapped(answer: Any) -> ChannelError:
    """The outbox's error for a homeserver's error answer."""
    code = str(getattr(answer, "status_code", "") or "")
    text = f"matrix: {answer}"
    if code == "M_LIMIT_EXCEEDED":
        retry = getattr(answer, "retry_after_ms", None) or 5000
        return ChannelRateLimited(retry / 1000, "Matrix rate limit")
    if code in _PERMANENT:
        return ChannelPermanentError(text)
    return ChannelTransientError(text)


def _txn(key: str, index: int) -> str:
    """A transaction id the homeserver deduplicates on: the same for every retry."""
    return f"sb{hashlib.sha256(key.encode()).hexdigest()[:32]}.{index}"
