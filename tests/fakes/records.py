"""What a channel records besides messages (``gateway.core.bus.ChannelRecords``), kept in
memory: for tests that start a channel on its own, with a sink of their own, not the gateway."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from gateway.core.bus import InboundSink
from gateway.core.channel import StartContext


@dataclass
class MemoryRecords:
    heard: dict[tuple[str, str], float] = field(default_factory=dict)
    reports: dict[tuple[str, str], str] = field(default_factory=dict)  # (channel, id) -> status
    tags: dict[tuple[str, str], str] = field(default_factory=dict)  # (channel, tag) -> id
    notes: list[str] = field(default_factory=list)
    cursors: dict[str, str] = field(default_factory=dict)

    async def heard_from(self, channel: str, chat_id: str) -> None:
        self.heard[(channel, chat_id)] = time.time()

    async def last_heard(self, channel: str, chat_id: str) -> float | None:
        return self.heard.get((channel, chat_id))

    async def delivery_report(
        self,
        channel: str,
        message_id: str,
        chat_id: str,
        status: str,
        error: str | None,
        *,
        tag: str | None = None,
    ) -> bool:
        news = self.reports.get((channel, message_id)) != status
        self.reports[(channel, message_id)] = status
        if tag is not None:
            self.tags[(channel, tag)] = message_id
        return news

    async def reported(self, channel: str, tags: Sequence[str]) -> dict[str, str]:
        return {t: self.tags[(channel, t)] for t in tags if (channel, t) in self.tags}

    async def tell_owner(self, channel: str, text: str, *, key: str, about: str) -> None:
        self.notes.append(text)

    async def load_cursor(self, channel: str) -> str | None:
        return self.cursors.get(channel)

    async def save_cursor(self, channel: str, cursor: str) -> None:
        self.cursors[channel] = cursor


def started(sink: InboundSink) -> StartContext:
    """What ``channel.start`` gets: ``sink``, and records kept in memory."""
    return StartContext(sink, records=MemoryRecords())
