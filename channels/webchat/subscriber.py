"""One open web chat page, as the channel sees it: a bounded queue of events."""

from __future__ import annotations

import asyncio
from typing import Any

SUBSCRIBER_BACKLOG = 2_000  # events a slow page may lag behind before it must resync


class Subscriber:
    """One open page; when it lags too far behind it is closed, and the page resyncs."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(SUBSCRIBER_BACKLOG)

    def push(self, event: dict[str, Any] | None) -> None:
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.close()

    def close(self) -> None:
        while not self.queue.empty():
            self.queue.get_nowait()
        self.queue.put_nowait(None)
