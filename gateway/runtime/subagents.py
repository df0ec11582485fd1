"""Background tasks (subagents): spawned by a chat turn or submitted through the task API,
finished on their own.

A task runs as its own turn (session ``subagent:<id>``) with its owner's permissions and
taint, bounded in number (it is ``queued`` until a slot is free) and time. Its result is
journaled as a message on the internal ``system`` channel; the turn handler delivers it to
the task's chat without another model call, exactly once.

Durable across restarts (one process): the task's turn id is recorded when it starts, and a
restart resumes that turn from its checkpoints, so a side effect already made is not made
again; a task that waited for an approval waits again. In a cluster the nodes do not know
whose task it was, so an open task is reported to its chat as interrupted instead.

Stopping (``DELETE /v1/tasks/{id}``) is recorded first, then the running turn is cancelled;
the task ends ``stopped``, its chat is told, and no restart resumes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from agent.llm.metered import person
from agent.loop import AgentLoop
from agent.turn import TurnKind, TurnOutcome, TurnRequest
from gateway.core.addressing import DEFAULT_AGENT, TASK_CHANNEL, qualify
from gateway.core.lifecycle import drain
from gateway.core.messages import (
    ChatRef,
    ChatType,
    InboundMessage,
    OutboundKind,
    OutboundMessage,
    new_id,
)
from gateway.core.principal import Principal
from gateway.runtime.accounting import turn_usage
from gateway.runtime.approvals import ApprovalDesk
from gateway.runtime.conversation import SYSTEM_CHANNEL
from gateway.runtime.local_bus import Bus
from gateway.store import Store, TaskRecord

log = logging.getLogger(__name__)

DECISION_CHECK_SECONDS = 5.0  # a task waiting for an approval looks whether it was decided


def principal_of(owner: Mapping[str, str]) -> Principal:
    """The principal a task acts for, from what its record keeps."""
    return Principal(
        owner.get("channel", ""),
        owner.get("sender_id", ""),
        owner.get("sender_name", ""),
        owner.get("role", "member"),
        ChatType(owner.get("chat_type", "dm")),
    )


def owner_of(principal: Principal) -> dict[str, str]:
    return {k: str(v) for k, v in asdict(principal).items()}


def session_of(record: TaskRecord) -> str:
    return qualify(record.agent, f"subagent:{record.id}")


class TaskSignal:
    """Wakes whoever follows tasks (the task API's event streams) when any task changes.

    Take :meth:`next_change` *before* reading a task's events, then wait on it: a change in
    between sets it, so nothing is missed."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    def next_change(self) -> asyncio.Event:
        return self._event


@dataclass(slots=True)
class _Run:
    record: TaskRecord
    task: asyncio.Task[None]


class Subagents:
    def __init__(
        self,
        *,
        agents: Mapping[str, AgentLoop],
        store: Store,
        bus: Bus,
        approvals: ApprovalDesk | None = None,
        max_concurrent: int = 3,
        timeout: float = 900.0,
        max_resume_attempts: int = 2,
        resume: bool = True,
        signal: TaskSignal | None = None,
    ) -> None:
        self._agents = agents
        self._store = store
        self._bus = bus
        self._approvals = approvals
        self._slots = asyncio.Semaphore(max_concurrent)
        self._timeout = timeout
        self._max_resume_attempts = max_resume_attempts
        self._resume = resume  # one process: open tasks resume at start (not in a cluster)
        self.signal = signal or TaskSignal()
        self._runs: dict[str, _Run] = {}
        self._stopping: set[str] = set()  # ids whose run is being cancelled by a stop
        self._decided: dict[str, asyncio.Event] = {}  # turn id -> its approval was decided

    def running(self) -> list[TaskRecord]:
        return [run.record for run in self._runs.values()]

    # -- starting ---------------------------------------------------------------------------

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
    ) -> str:
        """A chat turn's ``spawn``: the result goes back to that chat."""
        record = TaskRecord(
            new_id()[:8],
            prompt,
            task_type,
            chat,
            owner_of(principal),
            "queued",
            agent=agent,
            authorised_by=user_texts,
            tainted=tainted,
        )
        await self.submit(record)
        return record.id

    async def submit(self, record: TaskRecord) -> bool:
        """Record ``record`` as queued and start it; ``False`` (nothing started) when a task
        with its id exists already."""
        if not await self._store.tasks.start(record):
            return False
        self.signal.notify()
        self._launch(record, turn_id=None)
        return True

    def _launch(self, record: TaskRecord, *, turn_id: str | None, decided: bool = True) -> None:
        task = asyncio.create_task(
            self._run(record, turn_id=turn_id, decided=decided), name=f"subagent:{record.id}"
        )
        self._runs[record.id] = _Run(record, task)
        task.add_done_callback(lambda _: self._runs.pop(record.id, None))

    # -- running ----------------------------------------------------------------------------

    async def _run(self, record: TaskRecord, *, turn_id: str | None, decided: bool) -> None:
        """Run the task's turn to its end (``turn_id``: resume that turn; ``decided=False``:
        it waits for an approval first)."""
        try:
            turn = turn_id or new_id()
            if not decided:
                await self._wait_for_decision(turn)
            outcome = await self._turns(record, turn, resumed=turn_id is not None)
            if outcome is not None:  # None: stopped while it waited for a slot
                await self._finish(record, turn, outcome)
        except asyncio.CancelledError:
            if record.id not in self._stopping:
                raise  # shutdown: it stays open and resumes at the next start
            self._stopping.discard(record.id)
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            await self._close_turns(record)
            await self._tell(record, f"Background task {record.id} was stopped.")

    async def _turns(self, record: TaskRecord, turn: str, *, resumed: bool) -> TurnOutcome | None:
        """Run the turn, parking it while an approval is pending (without a slot)."""
        session_key = session_of(record)
        while True:
            async with self._slots:
                if not resumed:  # the turn exists before the task names it
                    await self._store.journal.start_turn(turn, session_key, "subagent", [])
                if not await self._store.tasks.move(record.id, "running", turn_id=turn):
                    await self._close_turns(record)  # stopped meanwhile
                    return None
                self.signal.notify()
                request = self._request(record, turn, resumed=resumed)
                outcome = await self._attempt(record, request)
                if outcome.awaiting is None or self._approvals is None:
                    return outcome
                decided = self._decided[turn] = asyncio.Event()
                usage = turn_usage(session_key, person(request.principal), outcome.usage)
                await self._approvals.park(request, outcome.awaiting, (), usage)
                if await self._store.tasks.move(record.id, "awaiting_approval"):
                    self.signal.notify()
            try:
                await self._until_decided(turn, decided)  # the slot is free meanwhile
            finally:
                self._decided.pop(turn, None)
            resumed = True

    async def _until_decided(self, turn: str, decided: asyncio.Event) -> None:
        """Wait for the decision: woken at once when it is made here, found by a look every
        few seconds when it was made elsewhere (another node of a cluster)."""
        assert self._approvals is not None
        while not decided.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(DECISION_CHECK_SECONDS):
                    await decided.wait()
            if turn not in await self._approvals.waiting_turns():
                return

    async def _wait_for_decision(self, turn: str) -> None:
        """After a restart: a task parked on an approval waits for it again (unless it was
        decided, or expired, while the gateway was down)."""
        decided = self._decided[turn] = asyncio.Event()
        try:
            if self._approvals is not None:
                await self._until_decided(turn, decided)
        finally:
            self._decided.pop(turn, None)

    async def _attempt(self, record: TaskRecord, request: TurnRequest) -> TurnOutcome:
        agent = self._agents.get(record.agent) or self._agents[DEFAULT_AGENT]
        try:
            async with asyncio.timeout(self._timeout):
                return await agent.run_turn(request)
        except TimeoutError:
            return TurnOutcome(
                failed=True, final_text=f"it did not finish within {self._timeout:g} seconds"
            )

    def _request(self, record: TaskRecord, turn: str, *, resumed: bool) -> TurnRequest:
        return TurnRequest(
            turn_id=turn,
            session_key=session_of(record),
            chat=record.chat,
            principal=principal_of(record.owner),
            kind=TurnKind.SUBAGENT,
            prompt=record.prompt,
            task_type=record.task_type,
            resumed=resumed,
            tainted=record.tainted,
            authorising_texts=record.authorised_by,
        )

    def wake(self, turn_id: str) -> bool:
        """An approval a task waits for was decided: resume it. ``False``: not a task's."""
        decided = self._decided.get(turn_id)
        if decided is None:
            return False
        decided.set()
        return True

    # -- ending -----------------------------------------------------------------------------

    async def _finish(self, record: TaskRecord, turn: str, outcome: TurnOutcome) -> None:
        session_key = session_of(record)
        principal = principal_of(record.owner)
        state = "failed" if outcome.failed else "done"
        result = outcome.final_text or "(the task produced no result)"
        await self._store.commit_turn(
            turn_id=turn,
            session_key=session_key,
            replies=(),
            state=state,
            usage=turn_usage(session_key, person(principal), outcome.usage),
        )
        # An API task's notes reach it through the outbox: its end is recorded after them,
        # when its last word arrives there too (gateway/runtime/task_board.py).
        events = record.chat.channel != TASK_CHANNEL
        if not await self._store.tasks.finish(record.id, state, result, events=events):
            return  # stopped meanwhile: that was told already
        self.signal.notify()
        headline = "finished" if state == "done" else "failed"
        await self._tell(record, f"Background task {record.id} {headline}:\n\n{result}")

    async def _tell(self, record: TaskRecord, text: str) -> None:
        """Journal the task's last word; the turn handler delivers it to the task's chat
        (one message per task: the same platform id)."""
        await self._bus.publish_inbound(
            InboundMessage(
                channel=SYSTEM_CHANNEL,
                chat_id=record.id,
                sender_id="subagent",
                sender_name="background task",
                text=text,
                platform_message_id=f"subagent:{record.id}",
            )
        )

    # -- stopping one -----------------------------------------------------------------------

    async def stop_task(self, task_id: str) -> bool:
        """Stop an open task (the task API's DELETE): recorded first, so no restart resumes
        it, then its run is cancelled. ``False`` when it had already finished."""
        if not await self._store.tasks.stop(task_id):
            return False
        self.signal.notify()
        run = self._runs.get(task_id)
        if run is not None:
            self._stopping.add(task_id)
            run.task.cancel()
        else:  # not running here (an earlier process's): close what it left
            record = await self._store.tasks.get(task_id)
            if record is not None:
                await self._close_turns(record)
                await self._tell(record, f"Background task {task_id} was stopped.")
        return True

    # -- restart and shutdown ---------------------------------------------------------------

    async def recover(self) -> None:
        """Pick up the tasks a previous run left open: resume them (one process), or tell
        their chats they were interrupted (a cluster)."""
        for record in await self._store.tasks.finished_with_open_turns():
            await self._close_turns(record)  # stopped, then cut before its turn closed
        if not self._resume:
            await self._interrupted()
            return
        for record in await self._store.tasks.running():
            await self._resume_one(record)

    async def _resume_one(self, record: TaskRecord) -> None:
        turn = record.turn_id
        if turn is None:  # never started (or started before turn ids were recorded)
            for legacy, _ in await self._store.journal.open_turns(session_of(record)):
                turn = legacy
        if turn is None:
            self._launch(record, turn_id=None)
            return
        if record.state == "awaiting_approval":
            log.info("background task %s waits for its approval again", record.id)
            self._launch(record, turn_id=turn, decided=False)
            return
        attempts = await self._store.journal.retry_turn(turn)
        if attempts > self._max_resume_attempts + 1:
            log.warning("background task %s interrupted %d times; giving up", record.id, attempts)
            outcome = TurnOutcome(
                failed=True, final_text="it was interrupted by restarts too often to go on"
            )
            await self._finish(record, turn, outcome)
            return
        log.info("resuming background task %s (turn %s)", record.id, turn)
        self._launch(record, turn_id=turn)

    async def _interrupted(self) -> None:
        records = await self._store.tasks.interrupted()
        for record in records:
            await self._close_turns(record)
        notices = [
            OutboundMessage(
                channel=record.chat.channel,
                chat_id=record.chat.chat_id,
                thread_id=record.chat.thread_id,
                text=f"Background task {record.id} was interrupted by a restart and did not finish: {record.prompt[:200]}",
                kind=OutboundKind.NOTICE,
                idempotency_key=f"subagent-interrupted:{record.id}",
            )
            for record in records
        ]
        if notices:
            self.signal.notify()
            await self._bus.publish_outbound(notices)

    async def _close_turns(self, record: TaskRecord) -> None:
        session_key = session_of(record)
        for turn, _ in await self._store.journal.open_turns(session_key):
            await self._store.commit_turn(
                turn_id=turn, session_key=session_key, replies=(), state="failed"
            )

    async def stop(self, *, drain_timeout: float = 10.0, now: asyncio.Event | None = None) -> None:
        """Give running tasks ``drain_timeout`` seconds (less once ``now`` is set); the rest
        stay open and resume at the next start."""
        tasks = [run.task for run in self._runs.values()]
        if not tasks:
            return
        pending = await drain(tasks, drain_timeout, now=now)
        for task in pending:
            task.cancel()
        for task in pending:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
