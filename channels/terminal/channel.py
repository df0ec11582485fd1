"""The terminal channel: the chat behind ``switchboard chat``, on the same bus as any other.

Its messages come from chat windows: the in-process one of ``switchboard chat``, or any
``switchboard chat`` attached through the gateway's local socket (:mod:`.server`). There is
one conversation (chat id ``local``); every attached window shows it.

A message from the outbox counts as delivered once a window has it on screen (the window
acknowledges it). With no window attached, :meth:`send` waits for one: the answer stays in
the durable outbox, so a question asked before leaving (or before a restart) is answered the
next time someone opens ``switchboard chat``.
"""

from __future__ import annotations

import asyncio
import getpass
import logging
import time
from pathlib import Path
from typing import Literal

from channels.terminal.frames import (
    Delta,
    Ended,
    Hello,
    LiveFrame,
    Message,
    Running,
    Started,
    Tool,
    Viewer,
)
from channels.terminal.server import TerminalServer
from gateway import __version__
from gateway.core.bus import Accepted, InboundSink
from gateway.core.channel import ChannelHealth, StartContext, TurnActivity
from gateway.core.errors import ChannelPermanentError, ChannelRateLimited, ChannelTransientError
from gateway.core.messages import ChatRef, ChatType, InboundMessage, OutboundMessage, new_id

log = logging.getLogger(__name__)

NAME = "terminal"
CHAT_ID = "local"
CLOSED_HOLD = 1.0  # seconds an answer waits when the channel is closed (the next start sends it)


class TerminalChannel:
    name = NAME

    def __init__(
        self,
        *,
        user: str | None = None,
        agent_name: str = "Switchboard",
        model: str = "",
        socket: Path | None = None,
        host: Literal["run", "chat"] = "run",
    ) -> None:
        self.user = user or getpass.getuser()
        self._host = host  # what runs this gateway (attached windows are told)
        self.agent_name = agent_name
        self.model = model
        self._sink: InboundSink | None = None
        self._viewers: list[Viewer] = []
        self._changed = asyncio.Event()  # replaced on every attach, detach and stop
        self._closed = True
        self._running: dict[str, Running] = {}
        self._socket = socket  # also accept ``switchboard chat`` windows there, once started
        self._server: TerminalServer | None = None
        self._last_message_at: float | None = None  # for the control center's health

    # -- Channel --------------------------------------------------------------------------

    async def start(self, context: StartContext) -> None:
        self._sink = context.sink
        self._closed = False
        if self._socket is not None:
            self._server = TerminalServer(self, self._socket, lambda: context.sink.settled(NAME))
            await self._server.start()

    async def stop(self) -> None:
        self._sink = None
        self._closed = True
        self._changed_now()
        if self._server is not None:
            await self._server.stop()
            self._server = None

    async def send(self, message: OutboundMessage) -> str | None:
        if message.chat_id != CHAT_ID:
            raise ChannelPermanentError(f"no terminal chat {message.chat_id!r}")
        files = tuple(a.path or a.filename or "file" for a in message.attachments)
        frame = Message(
            id=message.idempotency_key,
            kind=message.kind.value,
            text=message.text,
            turn=message.turn_id,
            files=files,
        )
        while True:
            if self._closed:  # stays pending; sent at the next start
                raise ChannelRateLimited(CLOSED_HOLD, "the terminal chat is closed")
            changed = self._changed
            viewers = list(self._viewers)
            if viewers and await _shown_by_any(viewers, frame):
                return None
            if changed is self._changed:  # nobody (left) to show it: wait for a window
                await changed.wait()

    async def stream(self, chat: ChatRef, turn_id: str, delta: str) -> None:
        self._show(Delta(turn=turn_id, text=delta))

    async def activity(self, chat: ChatRef, turn_id: str, activity: TurnActivity) -> None:
        if activity.kind == "tool":
            self._show(Tool(turn=turn_id, name=activity.detail))
            return
        self._running[turn_id] = Running(turn=turn_id, question=activity.detail)
        self._show(
            Started(
                turn=turn_id,
                question=activity.detail,
                resumed=activity.resumed,
                ids=activity.message_ids,
            )
        )

    async def turn_ended(self, chat: ChatRef, turn_id: str, *, answered: bool) -> None:
        self._running.pop(turn_id, None)
        self._show(Ended(turn=turn_id, answered=answered))

    def health(self) -> ChannelHealth:
        return ChannelHealth(
            connected=self._sink is not None,
            last_message_at=self._last_message_at,
            detail=f"{len(self._viewers)} window(s)",
        )

    # -- windows --------------------------------------------------------------------------

    def attach(self, viewer: Viewer) -> None:
        self._viewers.append(viewer)
        self._changed_now()

    def detach(self, viewer: Viewer) -> None:
        if viewer in self._viewers:
            self._viewers.remove(viewer)
            self._changed_now()

    def hello(self, user: str) -> Hello:
        """What a window that attaches is told first (with the turns already under way)."""
        return Hello(
            version=__version__,
            agent=self.agent_name,
            model=self.model,
            user=user,
            running=tuple(self._running.values()),
            host=self._host,
        )

    async def submit(
        self, text: str, *, message_id: str | None = None, user: str | None = None
    ) -> Accepted:
        """Hand a message to the gateway; returns once it is journaled (or refused)."""
        if self._sink is None:
            raise ChannelTransientError("the terminal chat is not running")
        who = user or self.user
        msg = InboundMessage(
            channel=self.name,
            chat_id=CHAT_ID,
            sender_id=who,
            sender_name=who,
            text=text,
            platform_message_id=message_id or new_id(),
            chat_type=ChatType.DM,
            mentioned=True,
        )
        accepted = await self._sink.publish_inbound(msg)
        self._last_message_at = time.time()
        return accepted

    def _show(self, frame: LiveFrame) -> None:
        for viewer in list(self._viewers):
            try:
                viewer.show(frame)
            except Exception as exc:  # a broken window must not break the others
                log.debug("terminal window failed to show %s: %s", frame.type, exc)

    def _changed_now(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()


async def _shown_by_any(viewers: list[Viewer], frame: Message) -> bool:
    """Offer ``frame`` to every window; True as soon as one has it on screen."""
    pending = {asyncio.create_task(viewer.deliver(frame)) for viewer in viewers}
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if any(
                not task.cancelled() and task.exception() is None and task.result() for task in done
            ):
                return True
        return False
    finally:
        for task in pending:
            task.cancel()
