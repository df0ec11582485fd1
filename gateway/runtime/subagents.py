"""Background tasks (subagents): spawned by a chat turn, finished on their own.

The ``spawn`` tool records a task in the :class:`TaskQueue`; :class:`Subagents` runs it once
the turn that asked for it is committed (so its progress notes never arrive before that
turn's answer). A task runs as its own turn (session ``subagent:<id>``) with the spawning
user's permissions and taint, bounded in number and time. Its result is journaled as a
message on the internal ``system`` channel; the turn handler delivers it to the originating
chat without another model call, exactly once. Shutdown waits a while for running tasks; a
task a restart cut short is reported to its chat as interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import partial

from agent.agent import Agent
from agent.turn.request import TurnRequest
from gateway.core.addressing import DEFAULT_AGENT, SYSTEM_CHANNEL, qualify
from gateway.core.lifecycle import drain
from gateway.core.messages import ChatRef, InboundMessage, OutboundKind, OutboundMessage, new_id
from gateway.core.principal import Principal
from gateway.core.turns import TurnKind
from gateway.runtime.accounting import turn_usage
from gateway.runtime.local_bus import Bus
from gateway.store import Store, TaskRecord, TurnEnd

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TaskStart:
    """A recorded task waiting to run, with whose rights it runs."""

    record: TaskRecord
    principal: Principal
    user_texts: tuple[str, ...]
    tainted: bool
    after_turn: str | None  # runs once this turn is committed


class TaskQueue:
    """The :class:`~gateway.core.services.TaskService` the ``spawn`` tool uses."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._queue: asyncio.Queue[TaskStart] = asyncio.Queue()

    async def spawn(
        self,
        *,
        prompt: str,
        task_type: str,
        chat: ChatRef,
        principal: Principal,
        user_texts: tuple[str, ...],
        tainted: bool,
        agent: str = DEFAULT_AGENT,
        after_turn: str | None = None,
    ) -> str:
        record = TaskRecord(
            new_id()[:8],
            prompt,
            task_type,
            chat,
            {k: str(v) for k, v in asdict(principal).items()},
            "running",
            agent=agent,
        )
        await self._store.tasks.start(record)
        self._queue.put_nowait(TaskStart(record, principal, user_texts, tainted, after_turn))
        return record.id

    async def next(self) -> TaskStart:
        return await self._queue.get()


class Subagents:
    def __init__(
        self,
        queue: TaskQueue,
        *,
        agents: Mapping[str, Agent],
        store: Store,
        bus: Bus,
        max_concurrent: int = 3,
        timeout: float = 900.0,
    ) -> None:
        self._queue = queue
        self._agents = agents
        self._store = store
        self._bus = bus
        self._slots = asyncio.Semaphore(max_concurrent)
        self._timeout = timeout
        self._tasks: dict[str, tuple[TaskRecord, asyncio.Task[None]]] = {}
        self._taking: asyncio.Task[None] | None = None

    def running(self) -> list[TaskRecord]:
        return [record for record, _ in self._tasks.values()]

    async def start(self) -> None:
        """Report the tasks a restart cut short, then run new ones as they are spawned."""
        await self._recover()
        if self._taking is None:
            self._taking = asyncio.create_task(self._take(), name="subagents")

    async def _take(self) -> None:
        while True:
            start = await self._queue.next()
            record = start.record
            task = asyncio.create_task(self._run(start), name=f"subagent:{record.id}")
            self._tasks[record.id] = (record, task)
            task.add_done_callback(partial(self._forget, record.id))

    def _forget(self, task_id: str, _: object) -> None:
        self._tasks.pop(task_id, None)

    async def _run(self, start: TaskStart) -> None:
        record, principal = start.record, start.principal
        user_texts, tainted = start.user_texts, start.tainted
        if start.after_turn is not None:
            turn_id = start.after_turn
            await self._bus.wait_until(lambda: self._store.journal.finished(turn_id))
        async with self._slots:
            turn_id = new_id()
            session_key = qualify(record.agent, f"subagent:{record.id}")
            await self._store.journal.start_turn(turn_id, session_key, TurnKind.SUBAGENT, [])
            request = TurnRequest(
                turn_id=turn_id,
                session_key=session_key,
                chat=record.chat,
                principal=principal,
                kind=TurnKind.SUBAGENT,
                prompt=record.prompt,
                task_type=record.task_type,
                tainted=tainted,
                authorising_texts=user_texts,
            )
            try:
                async with asyncio.timeout(self._timeout):
                    agent = self._agents.get(record.agent) or self._agents[DEFAULT_AGENT]
                    outcome = await agent.run_turn(request)
                state: TurnEnd = "failed" if outcome.failed else "done"
                result = outcome.final_text or "(the task produced no result)"
                usage = turn_usage(session_key, principal.person, outcome.usage)
            except TimeoutError:
                state, result = "failed", f"it did not finish within {self._timeout:g} seconds"
                usage = []
            await self._store.commit_turn(
                turn_id=turn_id, session_key=session_key, replies=(), state=state, usage=usage
            )
        await self._store.tasks.finish(record.id, state, result)
        headline = "finished" if state == "done" else "failed"
        await self._bus.publish_inbound(
            InboundMessage(
                channel=SYSTEM_CHANNEL,
                chat_id=record.id,
                sender_id="subagent",
                sender_name="background task",
                text=f"Background task {record.id} {headline}:\n\n{result}",
                platform_message_id=f"subagent:{record.id}",
            )
        )

    async def _recover(self) -> None:
        """Tell each chat about its background task that a restart cut short."""
        notices = [
            OutboundMessage(
                channel=record.chat.channel,
                chat_id=record.chat.chat_id,
                thread_id=record.chat.thread_id,
                text=f"Background task {record.id} was interrupted by a restart and did not finish: {record.prompt[:200]}",
                kind=OutboundKind.NOTICE,
                idempotency_key=f"subagent-interrupted:{record.id}",
            )
            for record in await self._store.tasks.interrupted()
        ]
        if notices:
            await self._bus.publish_outbound(notices)

    async def stop(self, *, drain_timeout: float = 10.0, now: asyncio.Event | None = None) -> None:
        """Give running tasks ``drain_timeout`` seconds (less once ``now`` is set); the rest
        stay recorded as running and are reported as interrupted on the next start."""
        if self._taking is not None:
            self._taking.cancel()
            await asyncio.gather(self._taking, return_exceptions=True)
            self._taking = None
        tasks = [task for _, task in self._tasks.values()]
        if not tasks:
            return
        pending = await drain(tasks, drain_timeout, now=now)
        for task in pending:
            task.cancel()
        for task in pending:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
