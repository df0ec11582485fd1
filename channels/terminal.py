"""The terminal channel behind ``switchboard chat``: stdin in, stdout out, same bus."""

from __future__ import annotations

import getpass
import sys
from typing import TextIO

from gateway.core.bus import Accepted, InboundSink
from gateway.core.errors import ChannelPermanentError
from gateway.core.messages import ChatType, InboundMessage, OutboundKind, OutboundMessage, new_id

CHAT_ID = "local"


class TerminalChannel:
    name = "terminal"

    def __init__(
        self, *, user: str | None = None, out: TextIO | None = None, prefix: str = ""
    ) -> None:
        self.user = user or getpass.getuser()
        self._out = out or sys.stdout
        self._prefix = prefix
        self._sink: InboundSink | None = None
        self.notices = 0

    async def start(self, sink: InboundSink) -> None:
        self._sink = sink

    async def stop(self) -> None:
        self._sink = None

    async def submit(self, text: str) -> Accepted:
        if self._sink is None:
            raise ChannelPermanentError("terminal channel is not started")
        msg = InboundMessage(
            channel=self.name,
            chat_id=CHAT_ID,
            sender_id=self.user,
            sender_name=self.user,
            text=text,
            platform_message_id=new_id(),
            chat_type=ChatType.DM,
            mentioned=True,
        )
        return await self._sink.publish_inbound(msg)

    async def send(self, message: OutboundMessage) -> str | None:
        if message.kind is OutboundKind.NOTICE:
            self.notices += 1
        text = message.text
        for attachment in message.attachments:
            text += f"\n[file: {attachment.path}]"
        self._out.write(f"{self._prefix}{text}\n")
        self._out.flush()
        return None
