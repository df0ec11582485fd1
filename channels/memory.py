"""An in-memory channel: push messages in, read what the gateway sent back.

It behaves like a real adapter (journaled intake, outbox delivery, typed errors), so tests
and embedders drive the whole gateway through it without any platform.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable

from gateway.core.bus import Accepted, InboundSink
from gateway.core.channel import StartContext
from gateway.core.errors import ChannelPermanentError
from gateway.core.messages import (
    Attachment,
    ChatRef,
    ChatType,
    InboundMessage,
    OutboundMessage,
)

FailureHook = Callable[[OutboundMessage], BaseException | None]


class MemoryChannel:
    def __init__(self, name: str = "memory") -> None:
        self.name = name
        self.sent: list[OutboundMessage] = []
        self.typing_chats: list[ChatRef] = []
        self.fail_next: FailureHook | None = None  # return an exception to raise on send
        self._sink: InboundSink | None = None
        self._changed = asyncio.Condition()
        self._ids = itertools.count(1)

    async def start(self, context: StartContext) -> None:
        self._sink = context.sink

    async def stop(self) -> None:
        self._sink = None

    async def push(
        self,
        text: str,
        *,
        chat_id: str = "chat-1",
        sender_id: str = "user-1",
        sender_name: str = "User",
        chat_type: ChatType = ChatType.DM,
        message_id: str | None = None,
        mentioned: bool = True,
        thread_id: str | None = None,
        attachments: tuple[Attachment, ...] = (),
        edit_of: str | None = None,
    ) -> Accepted:
        if self._sink is None:
            raise ChannelPermanentError(f"channel {self.name} is not started")
        msg = InboundMessage(
            channel=self.name,
            chat_id=chat_id,
            sender_id=sender_id,
            sender_name=sender_name,
            text=text,
            platform_message_id=message_id or f"m{next(self._ids)}",
            chat_type=chat_type,
            mentioned=mentioned,
            thread_id=thread_id,
            attachments=attachments,
            edit_of=edit_of,
        )
        return await self._sink.publish_inbound(msg)

    async def send(self, message: OutboundMessage) -> str | None:
        if self.fail_next is not None:
            error = self.fail_next(message)
            if error is not None:
                raise error
        async with self._changed:
            self.sent.append(message)
            self._changed.notify_all()
        return f"sent-{len(self.sent)}"

    async def typing(self, chat: ChatRef) -> None:
        self.typing_chats.append(chat)

    def texts(self, chat_id: str | None = None) -> list[str]:
        return [m.text for m in self.sent if chat_id is None or m.chat_id == chat_id]

    async def wait_for(
        self, count: int, *, chat_id: str | None = None, max_wait: float = 10.0
    ) -> list[OutboundMessage]:
        """Wait until ``count`` messages were sent (to ``chat_id``, if given)."""

        def matching() -> list[OutboundMessage]:
            return [m for m in self.sent if chat_id is None or m.chat_id == chat_id]

        async def reached() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: len(matching()) >= count)

        await asyncio.wait_for(reached(), max_wait)
        return matching()
