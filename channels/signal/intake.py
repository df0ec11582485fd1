"""The Signal intake: signal-cli's event stream, its position moved only past journaled
messages.

Each ``receive`` event is handled whole (a message journaled, its files fetched first when
the gate would admit it; a delivery receipt noted) before the next is read. The id of the
last event whose message was journaled is stored (:class:`gateway.core.bus.ChannelRecords`,
so a cluster's next leader goes on from there) and sent as ``Last-Event-ID`` when the stream
is opened again: signal-cli replays the events it kept after it, and the journal recognises
the messages it already has (by sender and timestamp). If handling fails (a full disk), the
stream is closed without moving the position and opened again after a backoff.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from channels.signal.convert import CHANNEL
from channels.signal.rpc import SignalRpc
from gateway.core.backoff import Backoff
from gateway.core.bus import ChannelRecords

log = logging.getLogger(__name__)

# Handle one event's params; returns whether it journaled a message (its id is then stored).
Handler = Callable[[dict[str, Any]], Awaitable[bool]]
Status = Callable[[str | None], None]


class EventStream:
    def __init__(
        self,
        rpc: SignalRpc,
        handle: Handler,
        records: ChannelRecords,
        *,
        backoff: Backoff,
        on_status: Status,
    ) -> None:
        self._rpc = rpc
        self._handle = handle
        self._records = records
        self._backoff = backoff
        self._on_status = on_status
        self._task: asyncio.Task[None] | None = None
        self.listening_since: float | None = None  # when the stream last connected
        self.connected = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="signal-events")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                position = await self._records.load_cursor(CHANNEL)
                async for event in self._rpc.events(position, on_open=self._opened):
                    if await self._handle(event.params) and event.id:
                        await self._records.save_cursor(CHANNEL, event.id)
                why = "signal-cli closed the event stream"
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                why = str(exc) or type(exc).__name__
            self.connected.clear()
            self._on_status(f"event stream: {why}")
            log.warning("signal: %s; connecting again", why)
            await asyncio.sleep(self._backoff.next())

    def _opened(self) -> None:
        self.listening_since = time.time()
        self.connected.set()
        self._backoff.reset()
        self._on_status(None)
