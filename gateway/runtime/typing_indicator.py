"""The "typing" indicator a chat shows while its turn runs (channels with ``SupportsTyping``).

Cosmetic: it never delays or fails a turn, and in a stampede of slow turns it must not take
the CPU and connections the answers need, so at most :data:`TYPING_MAX_IN_FLIGHT` typing
requests per channel are in flight at once (a turn that finds them busy tries again at its
next interval).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator, Mapping

from gateway.core.channel import Channel, SupportsTyping
from gateway.core.messages import ChatRef

log = logging.getLogger(__name__)

TYPING_INTERVAL = 4.0  # platforms clear "typing" after ~5 s
TYPING_DELAY = 0.8  # quick answers need no indicator (and save a platform request each)
TYPING_MAX_IN_FLIGHT = 4


class TypingIndicators:
    def __init__(self, channels: Mapping[str, Channel]) -> None:
        self._channels = channels
        self._tasks: set[asyncio.Task[None]] = set()
        self._in_flight: Counter[str] = Counter()

    @contextlib.asynccontextmanager
    async def show(self, chat: ChatRef) -> AsyncIterator[None]:
        """Keep ``chat`` showing "typing" (after a short delay) until the block ends."""
        channel: object = self._channels.get(chat.channel)  # mypy cannot intersect protocols
        if not isinstance(channel, SupportsTyping):
            yield
            return

        done = asyncio.Event()

        async def keep_typing() -> None:
            delay = TYPING_DELAY
            while not await _set_within(done, delay):
                delay = TYPING_INTERVAL
                if self._in_flight[chat.channel] >= TYPING_MAX_IN_FLIGHT:
                    continue
                self._in_flight[chat.channel] += 1
                try:
                    await channel.typing(chat)
                except Exception as exc:  # typing is cosmetic; never fail a turn over it
                    log.debug("typing indicator failed on %s: %s", chat.channel, exc)
                finally:
                    self._in_flight[chat.channel] -= 1

        task = asyncio.create_task(keep_typing())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        try:
            yield
        finally:
            # A request in flight finishes on its own (stop cancels it): cancelling it
            # would drop its connection, and the answer does not wait for it either.
            done.set()

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def _set_within(event: asyncio.Event, seconds: float) -> bool:
    """Whether ``event`` is set within ``seconds``."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()
    return event.is_set()
