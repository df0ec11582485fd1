"""The bus as the runtime sees it (:class:`Bus`), and its in-process implementation.

Channels see only :class:`gateway.core.bus.InboundSink`; the dispatcher, the turn handlers
and the outbox workers use the whole :class:`Bus`: journaled messages in, replies out, turns
woken by an approval decision, and the progress every commit and settled send makes (what
:meth:`gateway.runtime.app.Gateway.wait_idle` waits on). :class:`LocalBus` is durable through
the store and woken through asyncio events. In a cluster (``queue_inbound=False``) a
journaled message is not queued here: any node may run it
(:mod:`gateway.runtime.cluster.work`).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from gateway.core.bus import Accepted, InboundSink
from gateway.core.errors import StorageFullError
from gateway.core.lifecycle import waited
from gateway.core.messages import InboundMessage, OutboundMessage
from gateway.runtime.intake.storage_full import StorageFullWatch
from gateway.store import InboundRecord, Journal, Outbox


class Bus(InboundSink, Protocol):
    storage_full: StorageFullWatch  # told while the disk is full

    async def next_inbound(self) -> InboundRecord: ...

    def taken_in(self) -> list[InboundRecord]:
        """What :meth:`next_inbound` would give now without waiting (the intake's last look
        as it stops)."""
        ...

    async def publish_outbound(self, messages: Sequence[OutboundMessage]) -> None: ...

    def outbound_ready(self, channel: str) -> None: ...

    async def wait_outbound(self, channel: str, max_wait: float | None) -> None: ...

    def wake_turn(self, turn_id: str) -> None: ...

    async def next_wake(self) -> str: ...

    async def progressed(self) -> None: ...

    async def wait_until(self, done: Callable[[], Awaitable[bool]]) -> None: ...


class LocalBus:
    """In-process bus: durable through the store, woken through asyncio events."""

    def __init__(
        self,
        journal: Journal,
        outbox: Outbox,
        *,
        storage_full: StorageFullWatch,
        queue_inbound: bool = True,
    ) -> None:
        self._journal = journal
        self._outbox = outbox
        self._queue_inbound = queue_inbound
        self.storage_full = storage_full
        self._inbound: asyncio.Queue[InboundRecord] = asyncio.Queue()
        self._outbound_events: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self._wakes: asyncio.Queue[str] = asyncio.Queue()
        self._progress = asyncio.Condition()

    async def publish_inbound(self, msg: InboundMessage) -> Accepted:
        try:
            record = await self._journal.accept(msg)
        except StorageFullError:  # not acknowledged: the platform delivers it again
            await self.storage_full.refused(msg)
            raise
        self.storage_full.accepted()
        if record is None:
            return Accepted.DUPLICATE
        if self._queue_inbound:
            self._inbound.put_nowait(record)
        return Accepted.NEW

    async def admits(self, msg: InboundMessage) -> bool:
        if not msg.platform_message_id:
            return True
        return not await self._journal.seen(msg.channel, msg.platform_message_id)

    async def settled(self, channel: str | None = None) -> None:
        """Return once no message of ``channel`` (of any, for ``None``) is waiting, running
        or unsent."""

        async def idle() -> bool:
            open_inbound = await self._journal.open_count(channel)
            return open_inbound == 0 and await self._outbox.pending_count(channel) == 0

        await self.wait_until(idle)

    async def next_inbound(self) -> InboundRecord:
        return await self._inbound.get()

    def taken_in(self) -> list[InboundRecord]:
        records = []
        while not self._inbound.empty():
            records.append(self._inbound.get_nowait())
        return records

    async def publish_outbound(self, messages: Sequence[OutboundMessage]) -> None:
        if not messages:
            return
        await self._outbox.enqueue(messages)
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

    # -- turns woken by a decision ----------------------------------------------------------

    def wake_turn(self, turn_id: str) -> None:
        """An approval for ``turn_id`` was decided: its parked turn may resume."""
        self._wakes.put_nowait(turn_id)

    async def next_wake(self) -> str:
        return await self._wakes.get()

    # -- progress -----------------------------------------------------------------------

    async def progressed(self) -> None:
        """A turn committed or a send settled: wake whoever waits for the work to end."""
        async with self._progress:
            self._progress.notify_all()

    async def wait_until(self, done: Callable[[], Awaitable[bool]]) -> None:
        """Return once ``done()`` says so, checking at every progress (and every second, in
        case a notification raced the check). Bound it with ``asyncio.timeout``."""
        while True:
            async with self._progress:
                if await done():
                    return
                await waited(self._progress.wait(), 1.0)
