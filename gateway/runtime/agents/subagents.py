"""Background tasks (subagents): spawned by a chat turn or submitted through the task API,
finished on their own.

The ``spawn`` tool records a task in the :class:`TaskQueue` (so does ``POST /v1/tasks``,
through gateway/runtime/agents/task_board.py); :class:`Subagents` runs it, a spawned one once the
turn that asked for it is committed (so its progress notes never arrive before that turn's
answer). A task runs as its own turn (session ``subagent:<id>``) with its owner's
permissions and taint, bounded in number (it is ``queued`` until a slot is free) and time.
Its result is journaled as a message on the internal ``system`` channel; the turn handler
delivers it to the task's chat without another model call, exactly once.

Durable across restarts (one process): the task's turn id is recorded when it starts, and a
restart resumes that turn from its checkpoints, so a side effect already made is not made
again; a task that waited for an approval waits again. In a cluster a task belongs to the
node that runs it and is not resumed elsewhere: once that node is gone (its membership
connection ended), the next sweep of any node (every ``SWEEP_SECONDS``) reports it to its
chat as interrupted, and a node that starts again reports its own earlier ones at once.

Stopping (``DELETE /v1/tasks/{id}``) takes the path of a chat's ``/stop``
(gateway/runtime/dispatch/controls.py): the task is recorded as stopped and its turn's stop requested
in the journal first (no restart resumes it), then the turn's
:class:`~gateway.core.turns.TurnControl` is set: the turn stops at its next boundary (a model
call is cut at once, a call with a side effect finishes first) and its chat is told what it
had already done. A task parked for an approval has its request withdrawn; a queued one
never starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial

from agent.agent import Agent
from agent.request import TurnOutcome, TurnRequest
from gateway.core.addressing import DEFAULT_AGENT, SYSTEM_CHANNEL, TASK_CHANNEL, qualify
from gateway.core.errors import StoreError
from gateway.core.lifecycle import drain
from gateway.core.messages import (
    ChatRef,
    InboundMessage,
    OutboundKind,
    OutboundMessage,
    new_id,
)
from gateway.core.principal import Principal
from gateway.core.turns import TaskTypeName, TurnControl, TurnKind
from gateway.runtime.bus import Bus
from gateway.runtime.dispatch.controls import stop_turn
from gateway.runtime.people.budget import UserBudget
from gateway.runtime.people.spend_notices import SpendWatch
from gateway.runtime.turns.accounting import turn_usage
from gateway.runtime.turns.approvals import Approvals
from gateway.store import Store, TaskRecord, Tasks, TurnEnd

log = logging.getLogger(__name__)

SWEEP_SECONDS = 30.0  # a cluster: how often each node closes the open tasks of nodes that went

DECISION_CHECK_SECONDS = 5.0  # a task waiting for an approval looks whether it was decided


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


class TaskWakes:
    """Where an approval decision goes: to the background task waiting for it here, else on
    to ``fallback`` (the bus: the intake wakes the dispatcher's parked chat turn)."""

    def __init__(self, fallback: Callable[[str], None]) -> None:
        self._fallback = fallback
        self._waiting: dict[str, asyncio.Event] = {}

    def wake(self, turn_id: str) -> None:
        decided = self._waiting.get(turn_id)
        if decided is None:
            self._fallback(turn_id)
        else:
            decided.set()

    def expect(self, turn_id: str) -> asyncio.Event:
        """Set when ``turn_id``'s approval is decided here (before the request is stored, so
        a decision made at once is not missed)."""
        return self._waiting.setdefault(turn_id, asyncio.Event())

    def forget(self, turn_id: str) -> None:
        self._waiting.pop(turn_id, None)


@dataclass(frozen=True, slots=True)
class TaskStart:
    """A recorded task waiting to run."""

    record: TaskRecord
    after_turn: str | None  # runs once this turn is committed


class TaskQueue:
    """The :class:`~gateway.core.services.TaskService` the ``spawn`` tool uses, and where the
    task API submits: a task is recorded as queued, then :class:`Subagents` runs it."""

    def __init__(self, tasks: Tasks) -> None:
        self._tasks = tasks
        self.signal = TaskSignal()  # every change of a task, for those following one
        self._queue: asyncio.Queue[TaskStart] = asyncio.Queue()

    async def spawn(
        self,
        *,
        prompt: str,
        task_type: TaskTypeName,
        chat: ChatRef,
        principal: Principal,
        user_texts: tuple[str, ...],
        tainted: bool,
        agent: str = DEFAULT_AGENT,
        after_turn: str | None = None,
    ) -> str:
        """A chat turn's ``spawn``: the result goes back to that chat."""
        record = TaskRecord(
            new_id()[:8],
            prompt,
            task_type,
            chat,
            principal.record(),
            "queued",
            agent=agent,
            authorised_by=user_texts,
            tainted=tainted,
        )
        await self.submit(record, after_turn=after_turn)
        return record.id

    async def submit(self, record: TaskRecord, *, after_turn: str | None = None) -> bool:
        """Record ``record`` as queued and hand it over to run; ``False`` (nothing started)
        when a task with its id exists already."""
        if not await self._tasks.start(record):
            return False
        self.signal.notify()
        self._queue.put_nowait(TaskStart(record, after_turn))
        return True

    async def next(self) -> TaskStart:
        return await self._queue.get()


@dataclass(slots=True)
class _Run:
    record: TaskRecord
    control: TurnControl  # its turn's handle: the turn id, and how to stop it


class Subagents:
    def __init__(
        self,
        queue: TaskQueue,
        *,
        agents: Mapping[str, Agent],
        store: Store,
        bus: Bus,
        approvals: Approvals,
        wakes: TaskWakes,
        budget: UserBudget | None = None,
        spend: SpendWatch | None = None,
        max_concurrent: int = 3,
        timeout: float = 900.0,
        max_resume_attempts: int = 2,
        resume: bool = True,
        sweep_seconds: float = SWEEP_SECONDS,
    ) -> None:
        self._queue = queue
        self._agents = agents
        self._store = store
        self._bus = bus
        self._approvals = approvals
        self._wakes = wakes  # the approval decisions it waits for (Approvals wakes through it)
        self._budget = budget  # its owner's allowance and the caps of background work
        self._spend = spend  # tells the owner how far the money caps are spent
        self._slots = asyncio.Semaphore(max_concurrent)
        self._timeout = timeout
        self._max_resume_attempts = max_resume_attempts
        self._resume = resume  # one process: open tasks resume at start (not in a cluster)
        self._sweep_seconds = sweep_seconds  # a cluster: how often tasks of gone nodes are closed
        self.signal = queue.signal
        self._runs: dict[str, _Run] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._taking: asyncio.Task[None] | None = None
        self._sweeping: asyncio.Task[None] | None = None
        self._stopping: set[asyncio.Task[bool]] = set()  # stops another node asked for

    def running(self) -> list[TaskRecord]:
        return [run.record for run in self._runs.values()]

    async def start(self) -> None:
        """Pick up what a restart left open, then run new tasks as they are recorded."""
        await self._recover()
        if self._taking is None:
            self._taking = asyncio.create_task(self._take(), name="subagents")
        if not self._resume and self._sweeping is None:
            self._sweeping = asyncio.create_task(self._sweep(), name="subagents-sweep")

    async def _take(self) -> None:
        while True:
            start = await self._queue.next()
            self._launch(start.record, turn_id=None, after_turn=start.after_turn)

    def _launch(
        self,
        record: TaskRecord,
        *,
        turn_id: str | None,
        decided: bool = True,
        after_turn: str | None = None,
    ) -> None:
        """Run ``record`` (``turn_id``: resume that turn; ``decided=False``: it waits for an
        approval first; ``after_turn``: once that turn is committed)."""
        principal = Principal.from_record(record.owner)
        control = TurnControl(turn_id or new_id(), session_of(record), principal.person)
        run = _Run(record, control)
        work = self._run(run, resumed=turn_id is not None, decided=decided, after_turn=after_turn)
        task = asyncio.create_task(work, name=f"subagent:{record.id}")
        self._runs[record.id], self._tasks[record.id] = run, task
        task.add_done_callback(partial(self._forget, record.id))

    def _forget(self, task_id: str, _: object) -> None:
        self._runs.pop(task_id, None)
        self._tasks.pop(task_id, None)

    # -- running ----------------------------------------------------------------------------

    async def _run(
        self, run: _Run, *, resumed: bool, decided: bool, after_turn: str | None
    ) -> None:
        """Run the task's turn to its end, or close it where a stop finds it."""
        control = run.control
        if after_turn is not None:
            finished = partial(self._store.journal.finished, after_turn)
            if not await _unless_stopped(control, self._bus.wait_until(finished)):
                await self._close_stopped(run)
                return
        if not decided and not await self._decided(control, self._wakes.expect(control.turn_id)):
            await self._close_stopped(run)
            return
        while True:
            if not await _unless_stopped(control, self._slots.acquire()):
                await self._close_stopped(run)
                return
            try:
                outcome = await self._turn(run, resumed=resumed)
                if outcome is None:  # stopped before it could start
                    await self._close_stopped(run)
                    return
                if outcome.awaiting is None:
                    await self._finish(run, outcome)
                    return
                decision = await self._park(run, outcome)
            finally:
                self._slots.release()
            if not await self._decided(control, decision):  # the slot is free meanwhile
                await self._close_stopped(run)
                return
            resumed = True

    async def _turn(self, run: _Run, *, resumed: bool) -> TurnOutcome | None:
        """One attempt at the task's turn; ``None`` when the task was stopped first."""
        record, control = run.record, run.control
        if not resumed:  # the turn exists before the task names it
            current = await self._store.tasks.get(record.id)
            if current is None or not current.open:  # stopped before it was taken up
                return None
            await self._store.journal.start_turn(
                control.turn_id, control.session_key, TurnKind.SUBAGENT, []
            )
        moved = await self._store.tasks.move(record.id, "running", turn_id=control.turn_id)
        if not moved or control.stopping:
            return None
        self.signal.notify()
        request = self._request(record, control, resumed=resumed)
        if not resumed and self._budget is not None:  # a resumed task was admitted before
            admission = await self._budget.admit(
                request.principal, agent=record.agent, background=True
            )
            if admission.refusal is not None:
                refusal = admission.refusal
                return TurnOutcome(failed=True, final_text=refusal.notice or refusal.reason)
            request = replace(request, allowance=admission.allowance)
        agent = self._agents.get(record.agent) or self._agents[DEFAULT_AGENT]
        try:
            async with asyncio.timeout(self._timeout):
                return await agent.run_turn(request)
        except TimeoutError:
            text = f"it did not finish within {self._timeout:g} seconds"
            return TurnOutcome(failed=True, final_text=text)

    async def _park(self, run: _Run, outcome: TurnOutcome) -> asyncio.Event:
        """The turn waits for an approval: its request is stored and asked; returns what is
        set when it is decided here."""
        assert outcome.awaiting is not None
        record, control = run.record, run.control
        decided = self._wakes.expect(control.turn_id)  # first: a decision made at once wakes it
        request = self._request(record, control, resumed=True)
        usage = turn_usage(control.session_key, request.principal.person, outcome.usage)
        await self._approvals.park(request, outcome.awaiting, (), usage)
        if await self._store.tasks.move(record.id, "awaiting_approval"):
            self.signal.notify()
        return decided

    async def _decided(self, control: TurnControl, decided: asyncio.Event) -> bool:
        """Wait for the approval's decision: woken at once when it is made here, found by a
        look every few seconds when it was made elsewhere (another node of a cluster).
        ``False`` when the task is stopped first."""
        try:
            while not decided.is_set():
                if await _unless_stopped(control, decided.wait(), DECISION_CHECK_SECONDS):
                    break
                if control.stopping:
                    return False
                if control.turn_id not in await self._approvals.waiting_turns():
                    break
            return not control.stopping
        finally:
            self._wakes.forget(control.turn_id)

    def _request(self, record: TaskRecord, control: TurnControl, *, resumed: bool) -> TurnRequest:
        return TurnRequest(
            turn_id=control.turn_id,
            session_key=control.session_key,
            chat=record.chat,
            principal=Principal.from_record(record.owner),
            kind=TurnKind.SUBAGENT,
            prompt=record.prompt,
            task_type=record.task_type,
            resumed=resumed,
            tainted=record.tainted,
            authorising_texts=record.authorised_by,
            control=control,
        )

    # -- ending -----------------------------------------------------------------------------

    async def _finish(self, run: _Run, outcome: TurnOutcome | None) -> None:
        """Commit the task's turn (``None``: it never began) and record how the task ended;
        its chat is told, once."""
        record, control = run.record, run.control
        principal = Principal.from_record(record.owner)
        if outcome is not None:
            usage = turn_usage(control.session_key, principal.person, outcome.usage)
            await self._store.commit_turn(
                turn_id=control.turn_id,
                session_key=control.session_key,
                replies=(),
                state="failed" if outcome.failed else "done",
                usage=usage,
                tainted=outcome.read_untrusted,
            )
            if self._spend is not None:
                await self._spend.committed(principal, control.session_key, usage)
        if outcome is None:
            await self._tell(record, f"Background task {record.id} was stopped before it started.")
            return
        if control.stopping:  # its last words say what it had already done
            await self._tell(
                record, f"Background task {record.id} stopped:\n\n{outcome.final_text}"
            )
            return
        state: TurnEnd = "failed" if outcome.failed else "done"
        result = outcome.final_text or "(the task produced no result)"
        # An API task's notes reach it through the outbox: its end is recorded after them,
        # when its last word arrives there too (gateway/runtime/agents/task_board.py).
        events = record.chat.channel != TASK_CHANNEL
        if not await self._store.tasks.finish(record.id, state, result, events=events):
            # stopped just before it ended, or on another node of a cluster
            await self._tell(record, f"Background task {record.id} was stopped.")
            return
        self.signal.notify()
        headline = "finished" if state == "done" else "failed"
        await self._tell(record, f"Background task {record.id} {headline}:\n\n{result}")

    async def _close_stopped(self, run: _Run) -> None:
        """The task was stopped before its turn could go on (queued, waiting for a slot, or
        parked for an approval): a turn that had begun ends as a stopped chat turn does
        (its approval requests withdrawn, what it had done said)."""
        record, control = run.record, run.control
        if await self._store.journal.finished(control.turn_id):  # it never began
            await self._finish(run, None)
            return
        await self._approvals.withdraw(control.turn_id, by=control.stopped_by or "a stop")
        agent = self._agents.get(record.agent) or self._agents[DEFAULT_AGENT]
        outcome = await agent.stopped(self._request(record, control, resumed=True))
        await self._finish(run, outcome)

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

    def refusal(self, agent: str, principal: Principal) -> str | None:
        """Why ``principal`` may not start a background task of ``agent`` through the task
        API, or ``None``: the rule ``spawn`` has in a chat (``tools.policy``: members and
        admins as the owner set it)."""
        runs = self._agents.get(agent) or self._agents[DEFAULT_AGENT]
        refusal = runs.policy.role_refusal("spawn", principal)
        return None if refusal is None else refusal.reason

    async def stop_task(self, task_id: str, *, by: str) -> bool:
        """Stop an open task (the task API's DELETE) as ``/stop`` stops a chat's turn:
        recorded first (the task as stopped, its turn's stop in the journal), so no restart
        resumes it, then its turn is told to stop. ``False`` when it had already finished."""
        if not await self._store.tasks.stop(task_id, by=by):
            return False
        self.signal.notify()
        if await self._stop_here(task_id, by=by):
            return True
        # Not running here: not taken up yet, or (a cluster) running on another node, which
        # hears of the stop (the store's notification) and stops its turn; recorded here too.
        record = await self._store.tasks.get(task_id)
        if record is not None and record.turn_id is not None:
            await self._store.journal.request_stop(record.turn_id)
        elif record is not None:
            await self._tell(record, f"Background task {task_id} was stopped before it started.")
        return True

    def stopped_elsewhere(self, notice: str) -> None:
        """Another node of a cluster stopped a task (``TASKS_TOPIC``'s ``"<id>\\n<who>"``):
        if it runs here, its turn stops now rather than running on to its end."""
        task_id, _, by = notice.partition("\n")
        if task_id in self._runs:
            stopping = asyncio.create_task(self._stop_here(task_id, by=by or "another node"))
            self._stopping.add(stopping)
            stopping.add_done_callback(self._stopping.discard)

    async def _stop_here(self, task_id: str, *, by: str) -> bool:
        """Stop the task's turn if it runs here (durably first: see :func:`stop_turn`)."""
        run = self._runs.get(task_id)
        if run is None:
            return False
        if not run.control.stopping:
            await stop_turn(self._store.journal, run.control, by=by)
            log.info("background task %s stopped by %s", task_id, by)
        return True

    # -- restart and shutdown ---------------------------------------------------------------

    async def _recover(self) -> None:
        """Pick up the tasks a previous run left open: resume them (one process), or tell
        their chats they were interrupted (a cluster)."""
        for record in await self._store.tasks.finished_with_open_turns():
            await self._close_turns(record, by="a stop")  # stopped, then cut before it closed
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
            principal = Principal.from_record(record.owner)
            control = TurnControl(turn, session_of(record), principal.person)
            text = "it was interrupted by restarts too often to go on"
            await self._finish(_Run(record, control), TurnOutcome(failed=True, final_text=text))
            return
        log.info("resuming background task %s (turn %s)", record.id, turn)
        self._launch(record, turn_id=turn)

    async def _sweep(self) -> None:
        """A cluster: tell the chats of tasks whose node went (killed, cut off) that they were
        interrupted, without waiting for that node, or any, to start again; and stop the
        tasks running here that another node stopped, should its notice have been missed
        (the listener was reconnecting)."""
        while True:
            await asyncio.sleep(self._sweep_seconds)
            try:
                await self._interrupted(gone_only=True)
                for task_id in list(self._runs):
                    record = await self._store.tasks.get(task_id)
                    if record is not None and record.state == "stopped":
                        await self._stop_here(task_id, by="a stop on another node")
            except StoreError as exc:  # the database is out of reach: the next sweep
                log.warning("background tasks: looking for tasks of gone nodes failed: %s", exc)

    async def _interrupted(self, *, gone_only: bool = False) -> None:
        records = await self._store.tasks.interrupted(gone_only=gone_only)
        for record in records:
            await self._close_turns(record, by="a restart")
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

    async def _close_turns(self, record: TaskRecord, *, by: str) -> None:
        """Close the turns a task left open (its approval requests withdrawn)."""
        session_key = session_of(record)
        for turn, _ in await self._store.journal.open_turns(session_key):
            await self._approvals.withdraw(turn, by=by)
            await self._store.commit_turn(
                turn_id=turn, session_key=session_key, replies=(), state="failed"
            )

    async def stop(self, *, drain_timeout: float = 10.0, now: asyncio.Event | None = None) -> None:
        """Give running tasks ``drain_timeout`` seconds (less once ``now`` is set); the rest
        stay open and resume at the next start."""
        for background in (self._taking, self._sweeping):
            if background is not None:
                background.cancel()
                await asyncio.gather(background, return_exceptions=True)
        self._taking = self._sweeping = None
        await asyncio.gather(*self._stopping, return_exceptions=True)
        tasks = list(self._tasks.values())
        if not tasks:
            return
        pending = await drain(tasks, drain_timeout, now=now)
        for task in pending:
            task.cancel()
        for task in pending:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def _unless_stopped(
    control: TurnControl, work: Awaitable[object], within: float | None = None
) -> bool:
    """Wait for ``work``; ``False`` (and ``work`` cancelled) when the task is stopped first
    or ``within`` seconds pass."""
    task = asyncio.ensure_future(work)
    stop = asyncio.ensure_future(control.stop_requested.wait())
    try:
        await asyncio.wait({task, stop}, timeout=within, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    return task.done() and not task.cancelled() and task.exception() is None
