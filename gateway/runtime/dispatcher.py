"""Dispatcher: strict order within a session, sessions in parallel, bounded concurrency.

Each session with work has one worker task. Messages that arrive while the session's turn
runs wait and are folded into its next turn, in order (a slash command always gets a turn
of its own). A semaphore caps how many turns run at once; a generous time limit around
each turn keeps one stuck session from holding a slot forever.

A turn that waits for an approval is *parked* (its handler returns the turn): it holds no
slot while it waits, and its session keeps later messages back, in order, until
:meth:`Dispatcher.wake` resumes it (decided, or expired). Only ``/approve`` and ``/deny``
pass a parked session: the owner's own waiting turn is decided from the owner's own chat.

Work arrives from outside: :mod:`gateway.runtime.intake` (one process) or
:mod:`gateway.runtime.cluster_work` (a cluster) :meth:`enqueue` journaled messages and
:meth:`adopt` what a session left open; the scheduler :meth:`submit` scheduled runs. Before
a worker runs a session's turns it :meth:`Claims.hold` it: at once in one process
(:class:`LocalClaims`), or once this node holds the session's lock in a cluster.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from gateway.core.commands import APPROVAL_COMMANDS
from gateway.core.lifecycle import Service, drain
from gateway.core.load import NodeLoad
from gateway.core.messages import new_id
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
    """What a session has open when this node takes it: turns left running (``parked``: the
    ids of those waiting for an approval) and messages no turn has taken yet."""

    running: tuple[OpenTurn, ...] = ()
    parked: frozenset[str] = frozenset()
    pending: tuple[InboundRecord, ...] = ()


class Claims(Protocol):
    """Which node runs a session's turns."""

    async def hold(self, key: str) -> SessionBacklog:
        """Wait until this node holds the session; return what it has open."""

    def release(self, key: str) -> None:
        """The session has nothing left to do here: let any node take it."""


class LocalClaims:
    """One process runs every session: it holds each at once, with nothing left open (a
    fresh start adopts what the previous run left, see :mod:`gateway.runtime.intake`)."""

    async def hold(self, key: str) -> SessionBacklog:
        return SessionBacklog()

    def release(self, key: str) -> None:
        return None


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
    woken: bool = False  # ``resume`` is a parked turn woken by its decision
    parked: OpenTurn | None = None  # waits for an approval; later messages wait behind it
    task: asyncio.Task[None] | None = None
    running: bool = False
    held: bool = False  # this node holds the session (its open work taken on)
    seen: set[int] = field(default_factory=set)  # inbound ids taken in: each queued once

    def has_work(self) -> bool:
        if self.resume is not None:
            return True
        if self.parked is not None:
            return any(r.message.command in APPROVAL_COMMANDS for r in self.queue)
        return bool(self.queue or self.scheduled)


class Dispatcher(Service):
    def __init__(
        self,
        handler: TurnHandler,
        *,
        claims: Claims | None = None,
        load: NodeLoad | None = None,
        max_active_turns: int = 32,
        turn_timeout: float = 600.0,
    ) -> None:
        self._handler = handler
        self._claims = claims or LocalClaims()
        self._load = load or NodeLoad()
        self._slots = asyncio.Semaphore(max_active_turns)
        self._hard_limit = turn_timeout + 60.0
        self._sessions: dict[str, _Session] = {}
        self._woken: set[str] = set()  # decided before their turn was parked
        self._stopping = False

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        self._stopping = False

    async def stop(self, *, drain_timeout: float = 10.0, now: asyncio.Event | None = None) -> None:
        """Let running turns finish for ``drain_timeout`` (or until ``now`` is set), cancel
        the rest. A cancelled turn keeps its journal state and checkpoints; the next start
        resumes it."""
        self._stopping = True
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
        self._load.sessions.clear()

    # -- work coming in -------------------------------------------------------------------

    def enqueue(self, key: str, records: Iterable[InboundRecord]) -> None:
        """Journaled messages of the session ``key``, in journal order (each taken once)."""
        session = self._session(key)
        for record in records:
            if record.id not in session.seen:
                session.seen.add(record.id)
                session.queue.append(record)
        self._ensure_worker(key, session)

    def adopt(self, key: str, backlog: SessionBacklog) -> None:
        """This node now holds the session: take on what it has open."""
        session = self._session(key)
        session.held = True
        self._merge(session, backlog)
        self._ensure_worker(key, session)

    def submit(self, run: ScheduledRun) -> None:
        """Queue a scheduled turn behind the session's other work (same order, same caps)."""
        session = self._session(run.session_key)
        session.scheduled.append(run)
        self._ensure_worker(run.session_key, session)

    def wake(self, turn_id: str, *, remember: bool = True) -> bool:
        """A parked turn's approval was decided: resume it now, behind nothing. Whether it
        was parked here; if not and ``remember``, it resumes as soon as it is (a decision
        that came while its turn was still being parked)."""
        for key, session in self._sessions.items():
            if session.parked is not None and session.parked.id == turn_id:
                session.resume, session.parked, session.woken = session.parked, None, True
                self._ensure_worker(key, session)
                return True
        if remember:
            self._woken.add(turn_id)
        return False

    # -- what is here ---------------------------------------------------------------------

    def has_session(self, key: str) -> bool:
        """Whether the session has work here (held, or waiting to be)."""
        return key in self._sessions

    def parked_turns(self) -> list[str]:
        return [s.parked.id for s in self._sessions.values() if s.parked is not None]

    @property
    def running_turns(self) -> int:
        return self._load.running

    @property
    def queued_messages(self) -> int:
        return sum(len(s.queue) for s in self._sessions.values())

    # -- sessions -------------------------------------------------------------------------

    def _session(self, key: str) -> _Session:
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions[key] = _Session()
            self._load.sessions.add(key)
        return session

    def _merge(self, session: _Session, backlog: SessionBacklog) -> None:
        for turn in backlog.running:
            session.seen.update(record.id for record in turn.records)
            if turn.id in backlog.parked:
                self._park(session, turn)
            elif session.resume is None:
                session.resume = turn
        pending = [r for r in backlog.pending if r.id not in session.seen]
        session.seen.update(r.id for r in pending)
        # with what was enqueued meanwhile, in the order the messages were journaled
        session.queue = deque(sorted([*session.queue, *pending], key=lambda r: r.id))

    def _park(self, session: _Session, turn: OpenTurn) -> None:
        if turn.id in self._woken:
            self._woken.discard(turn.id)
            session.resume, session.woken = turn, True
        else:
            session.parked = turn

    def _ensure_worker(self, key: str, session: _Session) -> None:
        if session.task is None and not self._stopping:
            session.task = asyncio.create_task(self._work(key, session), name=f"session:{key}")

    # -- per-session worker ---------------------------------------------------------------

    async def _work(self, key: str, session: _Session) -> None:
        try:
            if not session.held:
                backlog = await self._claims.hold(key)  # another node may run it now
                session.held = True
                self._merge(session, backlog)
            while (batch := self._next_batch(key, session)) is not None:
                async with self._slots:
                    session.running = True
                    self._load.running += 1
                    try:
                        parked = await self._execute(batch)
                    finally:
                        session.running = False
                        self._load.running -= 1
                        self._load.turns_run += 1
                if parked is not None:
                    self._park(session, parked)
        finally:
            session.task = None
            if session.has_work():
                self._ensure_worker(key, session)  # not while stopping
            elif self._sessions.get(key) is session and session.parked is None:
                del self._sessions[key]
                self._load.sessions.discard(key)
                if session.held:
                    self._claims.release(key)

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
