"""The IRC channel: one connection to one server (:mod:`.client`), its private messages and
channels.

Start returns at once; the connection comes up in the background and is kept up (a server
restart, a network failure: reconnected with backoff, channels joined again), the status
page saying why while it is down. IRC delivers each line once and never again, so a line
that cannot be journaled (a full disk) is lost: logged, and shown in the status.
"""

from __future__ import annotations

import logging
import time

from channels.irc import render
from channels.irc.client import IrcClient
from channels.irc.convert import CHANNEL, Names, convert
from channels.irc.probe import probe as check_server
from channels.irc.protocol import Line, is_channel
from channels.irc.settings import IrcSettings
from gateway.core.backoff import Backoff
from gateway.core.bus import InboundSink
from gateway.core.channel import ChannelContext, ChannelHealth, StartContext
from gateway.core.errors import ChannelPermanentError, not_set
from gateway.core.messages import OutboundMessage

log = logging.getLogger(__name__)


class IrcChannel:
    name = CHANNEL

    def __init__(
        self, section: IrcSettings, context: ChannelContext, *, backoff: Backoff | None = None
    ) -> None:
        if not section.enabled:
            raise not_set("irc.server")
        self.settings = section
        self.client = IrcClient(section, self._on_line, on_status=self._status, backoff=backoff)
        self._sink: InboundSink | None = None
        self._last_error: str | None = "connecting"
        self._last_message_at: float | None = None

    async def start(self, context: StartContext) -> None:
        self._sink = context.sink
        self.client.start()
        log.info("irc: connecting to %s:%d as %s", *self.settings.address, self.settings.nick)

    async def stop(self) -> None:
        await self.client.stop()
        self._sink = None

    async def _on_line(self, line: Line) -> None:
        sink = self._sink
        message = convert(line, Names(self.client.nick, self.settings.nick))
        if sink is None or message is None:
            return
        try:
            await sink.publish_inbound(message)
        except Exception as exc:  # IRC will not deliver it again: say so, keep the connection
            self._last_error = f"could not journal a message from {message.sender_name}: {exc}"
            log.exception("irc: a message from %s was not journaled", message.sender_id)
            return
        self._last_message_at = time.time()

    async def send(self, message: OutboundMessage) -> str | None:
        target = _target(message.chat_id)
        text = message.text
        for attachment in message.attachments:  # IRC carries no files
            text += f"\n[a file was not sent: {attachment.filename or attachment.kind}]"
        await self.client.deliver(render.lines(text, target, self.client.source), target)
        return None  # IRC messages have no ids

    async def probe(self) -> str:
        """Connect and register (SASL included), then QUIT (``switchboard doctor``)."""
        return await check_server(self.settings)

    def health(self) -> ChannelHealth:
        host, port = self.settings.address
        return ChannelHealth(
            connected=self.client.registered.is_set() and self._last_error is None,
            last_error=self._last_error,
            last_message_at=self._last_message_at,
            detail=f"{self.client.nick} on {host}:{port}" + (" (TLS)" if self.settings.tls else ""),
        )

    def _status(self, error: str | None) -> None:
        self._last_error = error


def _target(chat_id: str) -> str:
    """Where a chat's messages go: the channel, or the nick of a person's mask."""
    if is_channel(chat_id):
        return chat_id
    nick = chat_id.split("!", 1)[0]
    if not nick or "*" in nick or "?" in nick:
        raise ChannelPermanentError(f"{chat_id!r} names no one nick to write to")
    return nick
