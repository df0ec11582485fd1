"""A turn shown live in its chat while it runs, for channels that can.

Streaming channels (the web chat, the terminal) get the answer's text as the model writes
it; channels that stream by editing (Telegram, Discord, Slack) get it through the
:class:`DraftStreamer`, where streaming is on for the chat; channels that show typing get
"typing…" while the turn runs; channels that show activity (the terminal) hear when a turn
starts, whether it resumes one a stop or crash cut short, and the name of each tool just
before it runs. When the turn ends, drafts stop (and go, when no answer replaces them) and
channels that show progress (the web chat) hear whether an answer is on its way. All of it
is cosmetic: the outbox's message stays the answer, and a display failure never fails a turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import replace

from agent.llm.base import TextSink
from agent.request import ToolSink, TurnRequest
from gateway.core.channel import (
    Channel,
    SupportsActivity,
    SupportsStreaming,
    SupportsTurnEnd,
    SupportsTyping,
    TurnActivity,
)
from gateway.core.messages import ChatRef
from gateway.runtime.outbound.drafts import DraftStreamer

log = logging.getLogger(__name__)

TYPING_INTERVAL = 4.0  # platforms clear "typing" after ~5 s
TYPING_DELAY = 0.8  # quick answers need no indicator (and save a platform request each)
TYPING_MAX_IN_FLIGHT = 4


class LiveDisplay:
    """What a chat shows of its running turn."""

    def __init__(self, channels: Mapping[str, Channel], *, drafts: DraftStreamer) -> None:
        self._channels = channels
        self._drafts = drafts
        self._typing = TypingIndicators(channels)

    async def stop(self) -> None:
        await self._typing.stop()

    def working(self, chat: ChatRef) -> AbstractAsyncContextManager[None]:
        """ "typing…" in ``chat`` while the block runs (after a short delay)."""
        return self._typing.show(chat)

    async def watch(self, request: TurnRequest) -> TurnRequest:
        """``request`` with ``on_text`` and ``on_tool`` wired to its chat's channel; tells a
        channel that shows activity that the turn starts."""
        chat, turn_id = request.chat, request.turn_id
        channel: object = self._channels.get(chat.channel)  # mypy cannot intersect protocols
        on_text: TextSink | None = None
        on_tool: ToolSink | None = None
        last = request.last_message
        if last is not None:
            sinks = self._drafts.sinks(
                chat,
                turn_id,
                group=last.is_group,
                reply_to=last.platform_message_id if last.is_group else None,
                fresh=not request.resumed,
            )
            if sinks is not None:
                on_text, on_tool = sinks
        if isinstance(channel, SupportsStreaming):
            streaming = channel

            async def forward(delta: str) -> None:
                await streaming.stream(chat, turn_id, delta)

            on_text = forward
        if isinstance(channel, SupportsActivity):
            showing = channel

            async def show(activity: TurnActivity) -> None:
                try:
                    await showing.activity(chat, turn_id, activity)
                except Exception as exc:
                    log.debug("activity display failed on %s: %s", chat.channel, exc)

            async def tool(name: str) -> None:
                await show(TurnActivity("tool", name))

            ids = tuple(m.platform_message_id for m in request.messages)
            await show(TurnActivity("started", last.text if last else "", request.resumed, ids))
            on_tool = tool
        return replace(request, on_text=on_text, on_tool=on_tool)

    async def settle(self, chat: ChatRef, turn_id: str) -> None:
        """The turn's words are all written: its draft stops changing before the commit
        (see :meth:`DraftStreamer.settle`)."""
        await self._drafts.settle(chat, turn_id)

    async def ended(self, chat: ChatRef, turn_id: str, *, answered: bool) -> None:
        """The turn is committed (or parked): stop drafting it, and tell a channel that
        shows progress whether an answer for this chat is on its way."""
        await self._drafts.turn_ended(chat, turn_id, answered=answered)
        channel: object = self._channels.get(chat.channel)  # mypy cannot intersect protocols
        if not isinstance(channel, SupportsTurnEnd):
            return
        try:
            await channel.turn_ended(chat, turn_id, answered=answered)
        except Exception as exc:  # progress display is cosmetic; the turn is committed
            log.debug("turn end display failed on %s: %s", chat.channel, exc)


class TypingIndicators:
    """The "typing" indicator a chat shows while its turn runs (channels with
    ``SupportsTyping``). Cosmetic: it never delays or fails a turn, and in a stampede of slow
    turns it must not take the CPU and connections the answers need, so at most
    :data:`TYPING_MAX_IN_FLIGHT` typing requests per channel are in flight at once (a turn
    that finds them busy tries again at its next interval)."""

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
