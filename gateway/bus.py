"""The message bus between channels and the agent.

Channels see only :class:`InboundSink`: ``publish_inbound`` returns after the message is
durable, and tells a duplicate apart, so an adapter acknowledges the platform only for
what is safely stored. The dispatcher consumes inbound records; outbox workers wait for
outbound work. :class:`LocalBus` is the in-process implementation over the SQLite store; a
networked bus (Redis Streams) would implement the same protocol, leaving channels and the
agent untouched.
"""

from __future__ import annotations

import asyncio
import enum
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Protocol

from gateway.messages import InboundMessage, OutboundMessage
from gateway.store import InboundRecord, Store


class Accepted(enum.Enum):
    """What happened to a published inbound message."""

    NEW = "new"  # journaled; a turn will answer it
    DUPLICATE = "duplicate"  # seen before; nothing to do
    REFUSED = "refused"  # access policy said no; audited, no turn
    IGNORED = "ignored"  # group chatter not addressed to the bot; no turn

    # Every outcome is final: the adapter may acknowledge the platform for all of them.


class InboundSink(Protocol):
    async def publish_inbound(self, msg: InboundMessage) -> Accepted: ...

    async def admits(self, msg: InboundMessage) -> bool:
        """Whether ``msg`` would become a turn (no side effects). Channels use it to skip
        costly work (downloads, transcription) for messages that will be refused, or that
        were journaled before (a platform's redelivery)."""
        ...


class Bus(InboundSink, Protocol):
    async def next_inbound(self) -> InboundRecord: ...

    def requeue(self, records: Iterable[InboundRecord]) -> None: ...

    async def publish_outbound(self, messages: Sequence[OutboundMessage]) -> None: ...

    def outbound_ready(self, channel: str) -> None: ...

    async def wait_outbound(self, channel: str, max_wait: float | None) -> None: ...


class LocalBus:
    """In-process bus: durable through the store, woken through asyncio events."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._inbound: asyncio.Queue[InboundRecord] = asyncio.Queue()
        self._outbound_events: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)

    async def publish_inbound(self, msg: InboundMessage) -> Accepted:
        record = await self._store.journal.accept(msg)
        if record is None:
            return Accepted.DUPLICATE
        self._inbound.put_nowait(record)
        return Accepted.NEW

    async def admits(self, msg: InboundMessage) -> bool:
        if not msg.platform_message_id:
            return True
        return not await self._store.journal.seen(msg.channel, msg.platform_message_id)

    async def next_inbound(self) -> InboundRecord:
        return await self._inbound.get()

    def requeue(self, records: Iterable[InboundRecord]) -> None:
        for record in records:
            self._inbound.put_nowait(record)

    def inbound_depth(self) -> int:
        return self._inbound.qsize()

    async def publish_outbound(self, messages: Sequence[OutboundMessage]) -> None:
        if not messages:
            return
        await self._store.outbox.enqueue(messages)
        for channel in {msg.channel for msg in messages}:
            self.outbound_ready(channel)

    def outbound_ready(self, channel: str) -> None:
        self._outbound_events[channel].set()

    async def wait_outbound(self, channel: str, max_wait: float | None) -> None:
        event = self._outbound_events[channel]
        try:
            if max_wait is not None and max_wait <= 0:
                return
            # asyncio.timeout rather than wait_for: no inner task that could swallow a
            # cancellation arriving together with the wake-up (Python 3.11).
            async with asyncio.timeout(max_wait):
                await event.wait()
        except TimeoutError:
            return
        finally:
            event.clear()
