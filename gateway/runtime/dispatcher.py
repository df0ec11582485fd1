"""Dispatcher: strict order within a session, sessions in parallel, bounded concurrency.

Each session with work has one worker task. Messages that arrive while the session's turn
runs wait and are folded into its next turn, in order (a slash command always gets a turn
of its own). A semaphore caps how many turns run at once; a generous time limit around
each turn keeps one stuck session from holding a slot forever.

A turn that waits for an approval is *parked* (its handler returns the turn): it holds no
slot while it waits, and its session keeps later messages back, in order, until
:meth:`Dispatcher.wake` resumes it (decided, or expired). Only ``/approve`` and ``/deny``
pass a parked session: the owner's own waiting turn is decided from the owner's own chat.

In a cluster (PostgreSQL) a session's work runs on the node that holds the session
(:class:`Claims`): :mod:`gateway.runtime.cluster_work` claims sessions with pending messages
and hands them over with :meth:`Dispatcher.adopt`; work submitted here for a session this
node does not hold (a scheduled job) first waits for it; a session with nothing left to do is
released.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from gateway.core.commands import APPROVAL_COMMANDS
from gateway.core.lifecycle import Service, drain
from gateway.core.messages import InboundMessage, new_id
from gateway.runtime.local_bus import Bus
from gateway.runtime.scheduled import ScheduledRun
from gateway.store import InboundRecord, OpenTurn

log = logging.getLogger(__name__)


class TurnStart(enum.StrEnum):
    """How a batch's turn begins."""

    NEW = "new"  # new messages, or a scheduled run
    RESUMED = "resumed"  # a turn a crash or a stop cut short, continued from its checkpoints
    WOKEN = "woken"  # a turn parked for an approval, continued once it was decided


@dataclass(frozen=True, slots=True)
class TurnBatch:
    """The work for one turn: new messages (or a scheduled run), or a turn to continue."""

    session_key: str
    turn_id: str
    records: tuple[InboundRecord, ...] = ()
    start: TurnStart = TurnStart.NEW
    scheduled: ScheduledRun | None = None


@dataclass(frozen=True, slots=True)
class SessionBacklog:
    """What a session has open when a node takes it: turns a node left running (``parked``:
    the ids of those waiting for an approval) and messages no turn has taken yet."""

    running: tuple[OpenTurn, ...] = ()
    parked: frozenset[str] = frozenset()
    pending: tuple[InboundRecord, ...] = ()


class Claims(Protocol):
    """Which node runs a session's turns (a cluster); see :mod:`gateway.runtime.cluster_work`."""

    async def hold(self, key: str) -> SessionBacklog:
        """Wait until this node holds the session; return what it has open."""

    def release(self, key: str) -> None:
        """The session has nothing left to do here: let any node take it."""


class TurnHandler(Protocol):
    async def handle(self, batch: TurnBatch) -> OpenTurn | None:
        """Run the turn and commit its outcome; or return the turn when it waits for an
        approval (parked, not committed). Must not raise except on cancellation."""

    async def abandon(self, batch: TurnBatch, error: BaseException) -> None:
        """Close a turn whose handler failed unexpectedly, telling the user."""


@dataclass(slots=True)
class _Session:
    queue: deque[InboundRecord] = field(default_factory=deque)
    scheduled: deque[ScheduledRun] = field(default_factory=deque)
    resume: OpenTurn | None = None
    task: asyncio.Task[None] | None = None
    running: bool = False
    parked: OpenTurn | None = None  # waits for an approval; later messages wait behind it
    woken: bool = False  # ``resume`` is a parked turn woken by its decision
    claimed: bool = False  # (cluster) this node holds the session
    seen: set[int] = field(default_factory=set)  # (cluster) inbound ids already taken in

    def has_work(self) -> bool:
        if self.resume is not None:
            return True
        if self.parked is not None:
            return any(r.message.command in APPROVAL_COMMANDS for r in self.queue)
        return bool(self.queue or self.scheduled)


class Dispatcher(Service):
    def __init__(
        self,
        bus: Bus,
        handler: TurnHandler,
        *,
        max_active_turns: int = 32,
        turn_timeout: float = 600.0,
        session_of: Callable[[InboundMessage], str] = lambda msg: msg.session_key,
        claims: Claims | None = None,
    ) -> None:
        self._bus = bus
        self._handler = handler
        self._session_of = session_of  # routing: which agent's session a message joins
        self._slots = asyncio.Semaphore(max_active_turns)
        self._hard_limit = turn_timeout + 60.0
        self._sessions: dict[str, _Session] = {}
        self._intake: asyncio.Task[None] | None = None
        self._woken: set[str] = set()  # decided before their turn was parked
        self.claims = claims  # a cluster's sessions; ``None``: this process runs them all
        self.turns_run = 0

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        if self._intake is None:
            self._intake = asyncio.create_task(self._consume(), name="dispatcher-intake")

    async def stop(self, *, drain_timeout: float = 10.0, now: asyncio.Event | None = None) -> None:
        """Stop intake, let running turns finish for ``drain_timeout`` (or until ``now`` is
        set), cancel the rest.

        A cancelled turn keeps its journal state and drafts; the next start resumes it.
        """
        if self._intake is not None:
            self._intake.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._intake
            self._intake = None
        for session in self._sessions.values():
            session.queue.clear()  # still pending in the journal; requeued on next start
            for run in session.scheduled:
                run.done.set()  # not run; the scheduler decides again after the restart
            session.scheduled.clear()
        tasks = [s.task for s in self._sessions.values() if s.task is not None]
        if tasks:
            still_running = await drain(tasks, drain_timeout, now=now)
            for task in still_running:
                task.cancel()
            await asyncio.gather(*still_running, return_exceptions=True)
        self._sessions.clear()

    # -- intake ---------------------------------------------------------------------------

    def resume(self, turns: Iterable[OpenTurn]) -> None:
        for turn in turns:
            self._woken.discard(turn.id)
            session = self._sessions.setdefault(turn.session_key, _Session())
            session.resume = turn
            self._ensure_worker(turn.session_key, session)

    def park(self, turns: Iterable[OpenTurn]) -> None:
        """Hold turns that wait for an approval (after a restart) until :meth:`wake`."""
        for turn in turns:
            self._hold(self._sessions.setdefault(turn.session_key, _Session()), turn)

    def wake(self, turn_id: str) -> None:
        """A parked turn's approval was decided: resume it now, behind nothing."""
        for key, session in self._sessions.items():
            if session.parked is not None and session.parked.id == turn_id:
                session.resume, session.parked, session.woken = session.parked, None, True
                self._ensure_worker(key, session)
                return
        self._woken.add(turn_id)  # still being parked: it resumes as soon as it is

    def _hold(self, session: _Session, turn: OpenTurn) -> None:
        if turn.id in self._woken:
            self._woken.discard(turn.id)
            session.resume, session.woken = turn, True
        else:
            session.parked = turn
        self._ensure_worker(turn.session_key, session)

    def submit(self, run: ScheduledRun) -> None:
        """Queue a scheduled turn behind the session's other work (same order, same caps)."""
        session = self._sessions.setdefault(run.session_key, _Session())
        session.scheduled.append(run)
        self._ensure_worker(run.session_key, session)

    async def _consume(self) -> None:
        while True:
            record = await self._bus.next_inbound()
            key = self._session_of(record.message)
            session = self._sessions.setdefault(key, _Session())
            session.queue.append(record)
            self._ensure_worker(key, session)

    # -- a cluster's sessions (gateway/runtime/cluster_work.py) ----------------------------

    def holds(self, key: str) -> bool:
        """Whether the session has work here (held, or waiting to be)."""
        return key in self._sessions

    def claimed(self, key: str) -> bool:
        """Whether this node holds the session (its open work already taken on)."""
        session = self._sessions.get(key)
        return session is not None and session.claimed

    def adopt(self, key: str, backlog: SessionBacklog) -> None:
        """This node now holds the session: take on what it has open."""
        session = self._sessions.setdefault(key, _Session())
        session.claimed = True
        self._merge(session, backlog)
        self._ensure_worker(key, session)

    def offer(self, key: str, records: Iterable[InboundRecord]) -> None:
        """Pending messages of a session this node has: queue those not taken in yet."""
        session = self._sessions.get(key)
        if session is None:
            return
        for record in records:
            if record.id not in session.seen:
                session.seen.add(record.id)
                session.queue.append(record)
        self._ensure_worker(key, session)

    def wake_parked(self, turn_id: str) -> bool:
        """Resume a turn parked here, if it is (a decision made on another node)."""
        if any(s.parked is not None and s.parked.id == turn_id for s in self._sessions.values()):
            self.wake(turn_id)
            return True
        return False

    def parked_turns(self) -> list[str]:
        return [s.parked.id for s in self._sessions.values() if s.parked is not None]

    def _merge(self, session: _Session, backlog: SessionBacklog) -> None:
        for turn in backlog.running:
            session.seen.update(record.id for record in turn.records)
            if turn.id in backlog.parked:
                session.parked = turn
            elif session.resume is None:
                session.resume = turn
        pending = [r for r in backlog.pending if r.id not in session.seen]
        session.seen.update(r.id for r in pending)
        # with what was offered meanwhile, in the order the messages were journaled
        session.queue = deque(sorted([*session.queue, *pending], key=lambda r: r.id))

    def _ensure_worker(self, key: str, session: _Session) -> None:
        if session.task is None:
            session.task = asyncio.create_task(self._work(key, session), name=f"session:{key}")

    # -- per-session worker ---------------------------------------------------------------

    async def _work(self, key: str, session: _Session) -> None:
        try:
            if self.claims is not None and not session.claimed:
                backlog = await self.claims.hold(key)  # another node may run it now
                session.claimed = True
                self._merge(session, backlog)
            while (batch := self._next_batch(key, session)) is not None:
                async with self._slots:
                    session.running = True
                    try:
                        parked = await self._execute(batch)
                    finally:
                        session.running = False
                        self.turns_run += 1
                if parked is not None:
                    self._hold(session, parked)
        finally:
            session.task = None
            if session.has_work():
                if self._intake is not None:  # not shutting down: keep the session going
                    self._ensure_worker(key, session)
            elif self._sessions.get(key) is session and session.parked is None:
                del self._sessions[key]
                if session.claimed and self.claims is not None:
                    self.claims.release(key)

    @staticmethod
    def _next_batch(key: str, session: _Session) -> TurnBatch | None:
        if session.resume is not None:
            turn, session.resume = session.resume, None
            woken, session.woken = session.woken, False
            start = TurnStart.WOKEN if woken else TurnStart.RESUMED
            return TurnBatch(key, turn.id, turn.records, start)
        if session.parked is not None:  # only decisions on approvals pass
            for record in session.queue:
                if record.message.command in APPROVAL_COMMANDS:
                    session.queue.remove(record)
                    return TurnBatch(key, new_id(), (record,))
            return None
        if not session.queue:
            if session.scheduled:
                return TurnBatch(key, new_id(), scheduled=session.scheduled.popleft())
            return None
        first = session.queue.popleft()
        records = [first]
        if first.message.command is None:
            while session.queue and session.queue[0].message.command is None:
                records.append(session.queue.popleft())
        return TurnBatch(key, new_id(), tuple(records))

    async def _execute(self, batch: TurnBatch) -> OpenTurn | None:
        try:
            return await asyncio.wait_for(self._handler.handle(batch), self._hard_limit)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug or a hang in the handler: close the turn visibly
            log.exception("turn for %s failed in the handler", batch.session_key)
            try:
                await self._handler.abandon(batch, exc)
            except Exception:
                log.exception("could not close the failed turn for %s", batch.session_key)
        return None

    # -- status ---------------------------------------------------------------------------

    @property
    def running_turns(self) -> int:
        return sum(1 for s in self._sessions.values() if s.running)

    @property
    def queued_messages(self) -> int:
        return sum(len(s.queue) for s in self._sessions.values())

    def sessions(self) -> list[str]:
        return list(self._sessions)
