"""The Signal channel: a signal-cli daemon (``daemon --http``) as the bot's Signal client.

signal-cli is installed and registered (or linked) by the user, as its documentation says;
the gateway never downloads or starts it. It only talks to its JSON-RPC endpoint: the event
stream for what arrives (:mod:`.intake`), ``send``, ``sendTyping`` and ``sendReaction`` for
what goes out (:mod:`.sender`), ``getAttachment`` for inbound files (:mod:`.media`) and
``listGroups`` for who is in a group (a lost send's receipts, :mod:`.recovery`).

An unreachable daemon does not fail the start: the stream is opened again with backoff,
and the status page shows why meanwhile.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from channels.signal.convert import CHANNEL, Bot, Converted, Receipt, convert
from channels.signal.intake import EventStream
from channels.signal.media import MediaStore
from channels.signal.probe import probe as check_daemon
from channels.signal.recovery import Finder, ReceiptBook
from channels.signal.rpc import RpcError, SignalRpc, Unreachable
from channels.signal.sender import Sender
from channels.signal.settings import SignalSettings, is_person
from gateway.core.backoff import Backoff
from gateway.core.bus import Accepted, InboundSink
from gateway.core.channel import ChannelContext, ChannelHealth, LostSend, StartContext
from gateway.core.errors import ChannelTransientError, not_set
from gateway.core.messages import ChatRef, OutboundKind, OutboundMessage

log = logging.getLogger(__name__)


class SignalChannel:
    name = CHANNEL

    def __init__(
        self, section: SignalSettings, context: ChannelContext, *, backoff: Backoff | None = None
    ) -> None:
        if not section.enabled or not section.rpc_url or not section.account:
            raise not_set("signal.rpc_url")
        self.settings = section
        self._rpc = SignalRpc(
            section.rpc_url, section.account, timeout=section.request_timeout_seconds
        )
        self._bot = Bot(section.account)
        self._receipts = ReceiptBook()
        self._stream: EventStream | None = None
        finder = Finder(
            self._receipts,
            wait_seconds=section.resend_wait_seconds,
            listening_since=lambda: None if self._stream is None else self._stream.listening_since,
        )
        self._sender = Sender(self._rpc, finder)
        self._media = MediaStore(
            self._rpc,
            context.workspace_dir / "attachments" / self.name,
            max_bytes=section.max_attachment_bytes,
        )
        self._backoff = backoff or Backoff(base=1.0, cap=60.0)
        self._sink: InboundSink | None = None
        self._reacted: dict[str, list[tuple[str, str, int]]] = {}  # session -> our reactions
        self._last_error: str | None = None
        self._last_message_at: float | None = None

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self, context: StartContext) -> None:
        self._sink = context.sink
        self._stream = EventStream(
            self._rpc,
            self._on_event,
            context.records,
            backoff=self._backoff,
            on_status=self._status,
        )
        self._stream.start()
        log.info("signal: %s through %s", self.settings.account, self.settings.rpc_url)

    async def stop(self) -> None:
        if self._stream is not None:
            await self._stream.stop()
        await self._rpc.close()
        self._sink = None

    # -- inbound --------------------------------------------------------------------------

    async def _on_event(self, params: dict[str, Any]) -> bool:
        """One notification; returns whether a message was journaled (raises when it could
        not be: the stream's position stays before it)."""
        sink = self._sink
        if sink is None:
            raise RuntimeError("signal channel is stopped")
        converted = convert(params, self._bot)
        if isinstance(converted, Receipt):
            self._receipts.add(converted)
            return False
        if converted is None:
            return False
        accepted = await self._publish(sink, converted)
        self._last_message_at = time.time()
        if accepted is Accepted.NEW and self.settings.reactions and not converted.message.edit_of:
            message = converted.message
            await self._sender.react(
                message.chat_id,
                converted.author,
                converted.timestamp,
                self.settings.reaction_emoji,
                remove=False,
            )
            self._reacted.setdefault(message.session_key, []).append(
                (message.chat_id, converted.author, converted.timestamp)
            )
        return True

    async def _publish(self, sink: InboundSink, converted: Converted) -> Accepted:
        message = converted.message
        if converted.files:
            admitted = await sink.admits(message)
            group = message.chat_id if message.is_group else None
            message = replace(
                message,
                attachments=await self._media.fetch(
                    message, converted.files, download=admitted, group_id=group
                ),
            )
        return await sink.publish_inbound(message)

    # -- outbound -------------------------------------------------------------------------

    async def send(self, message: OutboundMessage) -> str | None:
        receipt = await self._sender.send(message)
        await self._answered(message)
        return receipt

    def send_mark(self, chat: ChatRef) -> str | None:
        return None  # the attempt's time is what a resend needs (:mod:`.recovery`)

    async def resend(self, lost: LostSend) -> str | None:
        receipt = await self._sender.resend(lost, await self._people(lost.message.chat_id))
        await self._answered(lost.message)
        return receipt

    async def _people(self, chat_id: str) -> set[str]:
        """Who may acknowledge a message to ``chat_id``: the person, or the group's members."""
        if is_person(chat_id):
            return {chat_id}
        try:
            groups = await self._rpc.call("listGroups")
        except RpcError as exc:
            raise exc.channel_error() from exc
        except Unreachable as exc:
            raise ChannelTransientError(str(exc)) from exc
        for group in groups if isinstance(groups, list) else ():
            if isinstance(group, dict) and group.get("id") == chat_id:
                return _members(group.get("members"))
        return set()

    async def _answered(self, message: OutboundMessage) -> None:
        if message.kind in (OutboundKind.REPLY, OutboundKind.NOTICE):
            for chat_id, author, stamp in self._reacted.pop(message.chat.session_key, []):
                await self._sender.react(
                    chat_id, author, stamp, self.settings.reaction_emoji, remove=True
                )

    async def typing(self, chat: ChatRef) -> None:
        await self._sender.typing(chat)

    async def probe(self) -> str:
        """The daemon answers and serves the account (``switchboard doctor``)."""
        return await check_daemon(self.settings)

    def health(self) -> ChannelHealth:
        connected = self._stream is not None and self._stream.connected.is_set()
        return ChannelHealth(
            connected=connected and self._last_error is None,
            last_error=self._last_error,
            last_message_at=self._last_message_at,
            detail=f"{self.settings.account} through {self.settings.rpc_url}",
        )

    def _status(self, error: str | None) -> None:
        self._last_error = error


def _members(members: Any) -> set[str]:
    """A group's members as ``listGroups`` gives them (numbers, or {number, uuid} objects)."""
    found: set[str] = set()
    for member in members if isinstance(members, list) else ():
        if isinstance(member, str):
            found.add(member)
        elif isinstance(member, dict):
            found |= {
                v for k, v in member.items() if k in ("number", "uuid") and isinstance(v, str)
            }
    return found
