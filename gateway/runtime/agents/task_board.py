"""The task API's side of background tasks: submit, look up, follow, stop.

A task submitted through ``POST /v1/tasks`` is a background task like one ``spawn`` starts
(:mod:`gateway.runtime.agents.subagents`), acting for the API token. Its chat is its own on the
internal ``task`` channel (``task:<id>``): the progress notes it sends (``notify``,
``message``, an approval request) arrive at :class:`TaskChannel` through the outbox, are
recorded as the task's events once each, and go on to ``deliver_to`` when the task has one;
its answer reaches the same chat when it finishes.
"""

from __future__ import annotations

import asyncio
import hashlib

from gateway.core.addressing import TASK_CHANNEL
from gateway.core.channel import ChannelHealth, StartContext
from gateway.core.messages import ChatRef, OutboundKind, OutboundMessage, new_id
from gateway.core.principal import Principal
from gateway.runtime.agents.subagents import Subagents, TaskQueue
from gateway.runtime.bus import Bus
from gateway.store import TaskEvent, TaskRecord, Tasks


class TaskBoard:
    """What the task API calls (channels/api/tasks.py:TaskBackend)."""

    def __init__(self, tasks: Tasks, queue: TaskQueue, subagents: Subagents, *, bus: Bus) -> None:
        self._tasks = tasks
        self._queue = queue  # where tasks are recorded and handed over to run
        self._subagents = subagents  # what runs them (and stops one)
        self._bus = bus

    async def submit(
        self,
        *,
        text: str,
        agent: str,
        principal: Principal,
        deliver_to: ChatRef | None,
        key: str | None,
    ) -> tuple[TaskRecord, bool]:
        """Start a task for ``principal``; ``key`` (an idempotency key) makes a repeated
        submission return the same task. Returns the task and whether it is new."""
        if key:
            who = f"{principal.channel}:{principal.sender_id}:{key}"
            task_id = hashlib.sha256(who.encode()).hexdigest()[:12]
        else:
            task_id = new_id()[:12]
        record = TaskRecord(
            task_id,
            text,
            "general",
            ChatRef(TASK_CHANNEL, task_id),
            principal.record(),
            "queued",
            agent=agent,
            deliver_to=deliver_to,
            authorised_by=(text,),  # the client's own words (it acts with its token's role)
        )
        new = await self._queue.submit(record)
        stored = await self._tasks.get(task_id)
        assert stored is not None  # just written, or written before under the same key
        return stored, new

    def refusal(self, agent: str, principal: Principal) -> str | None:
        return self._subagents.refusal(agent, principal)

    async def get(self, task_id: str) -> TaskRecord | None:
        return await self._tasks.get(task_id)

    async def recent(
        self, *, limit: int, owner: tuple[str, str] | None, after: str | None
    ) -> list[TaskRecord]:
        return await self._tasks.recent(limit=limit, owner=owner, after=after)

    async def events(self, task_id: str, *, after: int = 0) -> list[TaskEvent]:
        return await self._tasks.events(task_id, after=after)

    async def ended(self, task_id: str) -> bool:
        return await self._tasks.ended(task_id)

    def next_change(self) -> asyncio.Event:
        return self._queue.signal.next_change()

    async def stop(self, task_id: str, *, by: str) -> bool:
        return await self._subagents.stop_task(task_id, by=by)

    async def note(self, message: OutboundMessage) -> TaskRecord | None:
        """A message the task sent to its chat: a progress note, or its last word (then its
        answer and final state become events: the outbox delivers a chat's messages in
        order, so after every note). Each is recorded once. Returns the task."""
        record = await self._tasks.get(message.chat_id)
        if record is None:
            return None
        if message.kind is OutboundKind.PROACTIVE:  # its last word: after all its notes
            recorded = await self._tasks.record_end(record.id)
        else:
            recorded = await self._tasks.note(record.id, message.text, key=message.idempotency_key)
        if recorded:
            self._queue.signal.notify()
        return record

    async def forward(self, message: OutboundMessage, target: ChatRef) -> None:
        """To the task's ``deliver_to``: notes say which task they are from (its answer
        says so itself)."""
        text = message.text
        if message.kind is not OutboundKind.PROACTIVE:
            text = f"[task {message.chat_id}] {text}"
        await self._bus.publish_outbound([message.forwarded(target, text, via="task")])


class TaskChannel:
    """The internal ``task`` channel: where an API task's notes and answer are delivered."""

    name = TASK_CHANNEL

    def __init__(self, board: TaskBoard) -> None:
        self._board = board
        self._running = False

    async def start(self, context: StartContext) -> None:
        self._running = True  # nothing arrives from outside

    async def stop(self) -> None:
        self._running = False

    async def send(self, message: OutboundMessage) -> str | None:
        record = await self._board.note(message)
        if record is None:
            return "no such task"
        if record.deliver_to is not None:
            await self._board.forward(message, record.deliver_to)
            return f"recorded; forwarded to {record.deliver_to.session_key}"
        return "recorded"

    def health(self) -> ChannelHealth:
        return ChannelHealth(connected=self._running, detail="background tasks' notes and answers")
