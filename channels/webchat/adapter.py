"""The web chat channel: browsers in, the same bus, journal, guards and sessions as any chat.

Each browser is one chat (its id is derived from a random HttpOnly cookie, so reloading the
page keeps the session). Messages go through the gateway's sink like every platform's;
replies arrive through :meth:`send` from the durable outbox, are written to the chat's
transcript and pushed to the browser's open pages over a WebSocket. While the model
writes, :meth:`stream` pushes fragments; the reply from the outbox then replaces them. A
turn that ends in a notice instead (stopped with ``/stop``, or failed) keeps what it had
written: the streamed text becomes an entry of its own, marked as stopped, where it was
shown, and the notice follows it (after the ``/stop`` that caused it).

The channel has no access settings: its user is the owner, which holds because the server
is either bound to loopback or requires the token (see :mod:`gateway.web.access.security`).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from channels.webchat.render import public
from channels.webchat.routes import routes
from channels.webchat.subscriber import Subscriber
from channels.webchat.transcript import CHAT_ID_RE, Entry, Transcripts, entry_id
from gateway.core.bus import Accepted, InboundSink
from gateway.core.channel import ChannelHealth, StartContext
from gateway.core.errors import ChannelPermanentError, ChannelTransientError
from gateway.core.messages import (
    Attachment,
    ChatRef,
    ChatType,
    InboundMessage,
    OutboundKind,
    OutboundMessage,
)
from gateway.core.webhost import Prepare

log = logging.getLogger(__name__)

NAME = "webchat"
HISTORY_ENTRIES = 200  # sent to a page when it connects
STREAMS_PER_CHAT = 3  # unfinished streamed answers remembered per chat (for reloads)
MAX_STREAM_CHARS = 200_000


@dataclass(slots=True)
class _Stream:
    """An answer being written: its text so far, and when it began to show."""

    text: str = ""
    started: float = field(default_factory=time.time)


class WebChatChannel:
    name = NAME

    def __init__(
        self,
        *,
        data_dir: Path,
        workspace_dir: Path,
        agent_name: str = "Switchboard",
        max_attachment_bytes: int = 20_000_000,
        max_files: int = 5,
        hears: bool = False,
    ) -> None:
        self.transcripts = Transcripts(data_dir / "channels" / NAME)
        self.workspace_dir = workspace_dir
        self.upload_dir = workspace_dir / "attachments" / NAME
        self.agent_name = agent_name
        self.max_attachment_bytes = max_attachment_bytes
        self.max_files = max_files
        self.hears = hears  # voice notes are transcribed (``[voice]``): the page may record
        self._sink: InboundSink | None = None
        self._subscribers: defaultdict[str, set[Subscriber]] = defaultdict(set)
        self._streams: defaultdict[str, OrderedDict[str, _Stream]] = defaultdict(OrderedDict)
        self._last_message_at: float | None = None
        self._last_error: str | None = None

    # -- Channel --------------------------------------------------------------------------

    async def start(self, context: StartContext) -> None:
        self._sink = context.sink

    async def stop(self) -> None:
        self._sink = None
        await self.close_web()

    async def send(self, message: OutboundMessage) -> str | None:
        if not CHAT_ID_RE.fullmatch(message.chat_id):
            raise ChannelPermanentError(f"no web chat {message.chat_id!r}")
        entry: Entry = {
            "id": entry_id(f"out:{message.idempotency_key}"),
            "role": "assistant",
            "kind": message.kind.value,
            "text": message.text,
            "at": time.time(),
            "turn": message.turn_id,
            "files": [_file(a) for a in message.attachments if a.path],
        }
        streamed = self._streams[message.chat_id].get(message.turn_id or "")
        if streamed is not None and streamed.text and message.kind is OutboundKind.NOTICE:
            await self._keep_stopped(message.chat_id, str(message.turn_id), streamed)
        try:
            added = await self.transcripts.append(message.chat_id, entry)
        except OSError as exc:
            self._last_error = f"could not store a reply: {exc.strerror or exc}"
            raise ChannelTransientError(self._last_error) from exc
        if message.turn_id and message.kind in (OutboundKind.REPLY, OutboundKind.NOTICE):
            self._streams[message.chat_id].pop(message.turn_id, None)
        if added:
            self._publish(message.chat_id, {"type": "message", "entry": public(entry)})
        return str(entry["id"])

    async def _keep_stopped(self, chat_id: str, turn_id: str, streamed: _Stream) -> None:
        """The text a turn had written before it stopped (or failed) stays, where it was
        shown: an entry of its own, dated when it began, marked as stopped."""
        entry: Entry = {
            "id": entry_id(f"stopped:{turn_id}"),
            "role": "assistant",
            "kind": "stopped",
            "text": streamed.text,
            "at": streamed.started,
            "turn": turn_id,
            "files": [],
        }
        try:
            added = await self.transcripts.append(chat_id, entry)
        except OSError as exc:
            self._last_error = f"could not store a reply: {exc.strerror or exc}"
            raise ChannelTransientError(self._last_error) from exc
        if added:
            self._publish(chat_id, {"type": "message", "entry": public(entry)})

    async def stream(self, chat: ChatRef, turn_id: str, delta: str) -> None:
        streams = self._streams[chat.chat_id]
        stream = streams.pop(turn_id, None) or _Stream()
        stream.text = (stream.text + delta)[-MAX_STREAM_CHARS:]
        streams[turn_id] = stream
        while len(streams) > STREAMS_PER_CHAT:
            streams.popitem(last=False)
        self._publish(chat.chat_id, {"type": "delta", "turn": turn_id, "text": delta})

    async def typing(self, chat: ChatRef) -> None:
        self._publish(chat.chat_id, {"type": "typing"})

    async def turn_ended(self, chat: ChatRef, turn_id: str, *, answered: bool) -> None:
        """Pages stop showing "typing" at once; text streamed for a turn that ends without
        an answer (nothing to say, or only a side effect) is dropped, also for reloads."""
        if not answered and chat.chat_id in self._streams:
            self._streams[chat.chat_id].pop(turn_id, None)
        self._publish(chat.chat_id, {"type": "done", "turn": turn_id, "answered": answered})

    def health(self) -> ChannelHealth:
        pages = sum(len(s) for s in self._subscribers.values())
        return ChannelHealth(
            connected=self._sink is not None,
            last_error=self._last_error,
            last_message_at=self._last_message_at,
            detail=f"{pages} open page(s)",
        )

    # -- from the browser -----------------------------------------------------------------

    async def submit(
        self,
        chat_id: str,
        text: str,
        *,
        client_id: str,
        attachments: Sequence[Attachment] = (),
    ) -> tuple[Accepted, Entry | None]:
        """Hand a browser's message to the gateway; store it in the transcript once."""
        if self._sink is None:
            raise ChannelTransientError("the web chat is not running")
        msg = InboundMessage(
            channel=NAME,
            chat_id=chat_id,
            sender_id=chat_id,
            sender_name="web user",
            text=text,
            platform_message_id=f"{chat_id}:{client_id}",
            chat_type=ChatType.DM,
            mentioned=True,
            attachments=tuple(attachments),
        )
        accepted = await self._sink.publish_inbound(msg)  # durable before we answer
        self._last_message_at = time.time()
        entry: Entry = {
            "id": entry_id(f"in:{msg.platform_message_id}"),
            "role": "user",
            "kind": "message",
            "text": text,
            "at": msg.received_at.timestamp(),
            "turn": None,
            "files": [_file(a) for a in attachments],
        }
        if accepted is Accepted.DUPLICATE:  # a retried POST: show what was stored
            chat = await self.transcripts.load(chat_id)
            found = chat.find(entry["id"])
            if found is not None:
                return accepted, found
        else:
            # Before any await: the page sees the question before the answer streams in.
            self._publish(chat_id, {"type": "message", "entry": public(entry)})
        try:
            added = await self.transcripts.append(chat_id, entry)
        except OSError as exc:  # the message is journaled and will be answered anyway
            self._last_error = f"could not store a message: {exc.strerror or exc}"
            log.warning("web chat: %s", self._last_error)
        else:
            if added and accepted is Accepted.DUPLICATE:
                self._publish(chat_id, {"type": "message", "entry": public(entry)})
        return accepted, entry

    async def subscribe(self, chat_id: str) -> tuple[Subscriber, dict[str, Any]]:
        """Register a page and return it with the snapshot it starts from (no gap)."""
        chat = await self.transcripts.load(chat_id)
        subscriber = Subscriber()
        self._subscribers[chat_id].add(subscriber)
        entries = sorted(chat.entries, key=lambda e: float(e.get("at") or 0))[-HISTORY_ENTRIES:]
        hello = {
            "type": "hello",
            "agent": self.agent_name,
            "hears": self.hears,
            "entries": [public(e) for e in entries],
            "streaming": [{"turn": t, "text": s.text} for t, s in self._streams[chat_id].items()],
        }
        return subscriber, hello

    def unsubscribe(self, chat_id: str, subscriber: Subscriber) -> None:
        subscribers = self._subscribers.get(chat_id)
        if subscribers is not None:
            subscribers.discard(subscriber)
            if not subscribers:
                del self._subscribers[chat_id]

    async def file_for(self, chat_id: str, entry: str, index: int) -> Entry | None:
        chat = await self.transcripts.load(chat_id)
        found = chat.find(entry)
        files = found.get("files", []) if found else []
        return files[index] if 0 <= index < len(files) else None

    def _publish(self, chat_id: str, event: dict[str, Any]) -> None:
        for subscriber in list(self._subscribers.get(chat_id, ())):
            subscriber.push(event)

    # -- web server -----------------------------------------------------------------------

    def web_routes(self, prepare: Prepare) -> Sequence[web.RouteDef]:
        return routes(self, prepare)

    async def close_web(self) -> None:
        for subscribers in list(self._subscribers.values()):
            for subscriber in list(subscribers):
                subscriber.close()


def _file(attachment: Attachment) -> dict[str, Any]:
    return {
        "name": attachment.filename or Path(attachment.path or "file").name,
        "kind": attachment.kind,
        "size": attachment.size,
        "mime": attachment.mime_type,
        "path": attachment.path,
    }
