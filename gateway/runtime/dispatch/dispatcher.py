"""Dispatcher: strict order within a session, sessions in parallel, bounded concurrency.

Each session with work has one worker task. Messages that arrive while the session's turn
runs wait and are folded into its next turn, in order (a slash command always gets a turn
of its own, and so does each chat's run of messages in a person's conversation across
channels: each is answered in its own chat). A semaphore caps how many turns run at once; a generous time limit around
each turn keeps one stuck session from holding a slot forever.

A turn that waits for an approval is *parked* (its handler returns the turn): it holds no
slot while it waits, and its session keeps later messages back, in order, until
:meth:`Dispatcher.wake` resumes it (decided, or expired). Only ``/approve`` and ``/deny``
pass a parked session: the owner's own waiting turn is decided from the owner's own chat.

Work arrives from outside: :mod:`gateway.runtime.intake.local` (one process) or
:mod:`gateway.runtime.cluster.work` (a cluster) :meth:`enqueue` journaled messages and
:meth:`adopt` what a session left open; the scheduler :meth:`submit` scheduled runs. Before
a worker runs a session's turns it :meth:`Claims.hold` it: at once in one process
(:class:`LocalClaims`), or once this node holds the session's lock in a cluster.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gateway.core.commands import APPROVAL_COMMANDS
from gateway.core.errors import StaleClaim
from gateway.core.lifecycle import Service, drain
from gateway.core.load import NodeLoad
from gateway.core.messages import InboundMessage, new_id
from gateway.core.turns import TurnControl
from gateway.runtime.schedule.runs import ScheduledRun
from gateway.store import InboundRecord, OpenTurn
from gateway.store.cluster.fencing import FENCE, Fence

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
    control: TurnControl | None = None  # a chat turn's handle: stop it, steer it, ask it
    stopped: bool = False  # asked to stop before it could continue: close it, say so


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

    def fence(self, key: str) -> Fence | None:
        """The claim this node holds the session under: its turns' store writes carry it
        (``None``: nobody else can take the session)."""


class LocalClaims:
    """One process runs every session: it holds each at once, with nothing left open (a
    fresh start adopts what the previous run left, see :mod:`gateway.runtime.intake.local`)."""

    async def hold(self, key: str) -> SessionBacklog:
        return SessionBacklog()

    def release(self, key: str) -> None:
        return None

    def fence(self, key: str) -> Fence | None:
        return None


class Controls(Protocol):
    """What is answered at intake, beside the session's queue (``/stop``, ``/status``, an
    edit of a message): :mod:`gateway.runtime.dispatch.controls`."""

    def intercepts(self, message: InboundMessage, session: SessionView) -> bool:
        """Whether ``message`` is handled beside the queue instead of waiting in it."""

    def stops(self, message: InboundMessage) -> bool:
        """Whether a control (one it intercepts) asks to stop the running turn."""

    async def handle(self, record: InboundRecord, session: SessionView) -> None:
        """Handle it (and close its journal row); must not raise except on cancellation."""


class TurnHandler(Protocol):
    async def handle(self, batch: TurnBatch) -> OpenTurn | None:
        """Run the turn and commit its outcome; or return the turn when it waits for an
        approval (parked, not committed). Must not raise except on cancellation."""

    async def abandon(self, batch: TurnBatch, error: BaseException) -> None:
        """Close a turn whose handler failed unexpectedly, telling the user."""


def _joins(queue: deque[InboundRecord], first: InboundMessage) -> bool:
    """Whether the head of ``queue`` joins the turn of ``first``: not a command, from the
    same chat (a person's conversation across channels answers each chat's messages in that
    chat, in order), and neither of them an event that has a turn of its own."""
    if not queue:
        return False
    head = queue[0].message
    return (
        head.command is None and head.chat == first.chat and not (head.own_turn or first.own_turn)
    )


def _set(event: asyncio.Event) -> asyncio.Event:
    event.set()
    return event


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
    batch: TurnBatch | None = None  # the turn running now
    stop_parked: bool = False  # ``resume`` is to be closed as stopped, not run on
    idle: asyncio.Event = field(default_factory=lambda: _set(asyncio.Event()))  # no turn runs
    # controls running beside the queue: the session (its claim, in a cluster) is kept until
    # they are done, or another look finds the control's message still pending and runs it
    # again
    controls: int = 0

    def has_work(self) -> bool:
        if self.resume is not None:
            return True
        if self.parked is not None:
            return any(r.message.command in APPROVAL_COMMANDS for r in self.queue)
        return bool(self.queue or self.scheduled)


class SessionView:
    """What a control command sees of its session, and may change, while it runs beside the
    session's turns."""

    def __init__(self, dispatcher: Dispatcher, key: str) -> None:
        self._dispatcher = dispatcher
        self.key = key

    @property
    def _session(self) -> _Session:
        """The session as it is now (the one the control saw may have ended meanwhile; an
        ended one reads as empty)."""
        return self._dispatcher.peek(self.key)

    @property
    def running(self) -> TurnControl | None:
        batch = self._session.batch
        return None if batch is None else batch.control

    @property
    def running_records(self) -> tuple[InboundRecord, ...]:
        batch = self._session.batch
        return () if batch is None else batch.records

    @property
    def parked(self) -> OpenTurn | None:
        return self._session.parked

    @property
    def resuming(self) -> OpenTurn | None:
        """The turn cut short (by a crash) that the session resumes before anything else."""
        return self._session.resume

    def queued(self) -> list[InboundRecord]:
        return list(self._session.queue)

    def drop_queued(self) -> list[InboundRecord]:
        """Take the waiting messages out of the queue (decisions on approvals stay)."""
        session = self._session
        dropped = [r for r in session.queue if r.message.command not in APPROVAL_COMMANDS]
        session.queue = deque(r for r in session.queue if r not in dropped)
        return dropped

    def replace_queued(self, old: InboundRecord, new: InboundRecord) -> None:
        """``new`` takes the place of ``old`` (an edit of a message not answered yet)."""
        session = self._session
        session.seen.add(new.id)
        session.queue = deque(new if r.id == old.id else r for r in session.queue)

    def queue(self, record: InboundRecord) -> None:
        """Queue ``record`` after all (an edit that joins the running turn): it waits like
        any message."""
        self._dispatcher.requeue(self.key, record)

    def stop_parked(self) -> OpenTurn | None:
        """Close the turn parked for an approval, or the one about to be resumed, as
        stopped; ``None`` when none is."""
        return self._dispatcher.stop_parked(self.key)

    async def turn_ended(self) -> None:
        """Return once no turn of this session runs."""
        await self._session.idle.wait()


class Dispatcher(Service):
    def __init__(
        self,
        handler: TurnHandler,
        *,
        controls: Controls,
        claims: Claims,
        load: NodeLoad,
        max_active_turns: int = 32,
        turn_timeout: float = 600.0,
    ) -> None:
        self._handler = handler
        self._controls = controls
        self._control_tasks: set[asyncio.Task[None]] = set()
        self._claims = claims
        self._load = load
        self._slots = asyncio.Semaphore(max_active_turns)
        self._hard_limit = turn_timeout + 60.0
        self._sessions: dict[str, _Session] = {}
        self._woken: set[str] = set()  # decided before their turn was parked
        self._stopping = False

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        self._stopping = False

    def stop_taking(self) -> None:
        """Start no turn from now on (the gateway is stopping): what comes in stays pending
        in the journal for the next start, except a ``/stop``, which still stops its turn."""
        self._stopping = True

    async def stop(self, *, drain_timeout: float = 10.0, now: asyncio.Event | None = None) -> None:
        """Let running turns (and controls under way) finish for ``drain_timeout`` (or until
        ``now`` is set), cancel the rest. A cancelled turn keeps its journal state and
        checkpoints; the next start resumes it."""
        self._stopping = True
        for session in self._sessions.values():
            session.queue.clear()  # still pending in the journal; requeued on next start
            for run in session.scheduled:
                run.done.set()  # not run; the scheduler decides again after the restart
            session.scheduled.clear()
        tasks = [s.task for s in self._sessions.values() if s.task is not None]
        tasks += self._control_tasks  # a /stop among them ends its turn's wait early
        if tasks:
            still_running = await drain(tasks, drain_timeout, now=now)
            for task in still_running:
                task.cancel()
            await asyncio.gather(*still_running, return_exceptions=True)
        self._sessions.clear()
        self._load.sessions.clear()

    # -- work coming in -------------------------------------------------------------------

    def enqueue(self, key: str, records: Iterable[InboundRecord]) -> None:
        """Journaled messages of the session ``key``, in journal order (each taken once).
        A control (``/stop``, ``/status``, an edit) is handled at once, beside the queue."""
        session = self._session(key)
        view = SessionView(self, key)
        for record in records:
            if record.id in session.seen:
                continue
            session.seen.add(record.id)
            if self._intercepted(record, view):
                continue
            session.queue.append(record)
        self._ensure_worker(key, session)

    def requeue(self, key: str, record: InboundRecord) -> None:
        """Queue a record a control looked at and let through."""
        session = self._session(key)
        session.queue.append(record)
        self._ensure_worker(key, session)

    def peek(self, key: str) -> _Session:
        """The session ``key`` as it is now; an empty one (not kept) when it has no work."""
        return self._sessions.get(key) or _Session()

    def _intercepted(self, record: InboundRecord, view: SessionView) -> bool:
        """Handle ``record`` beside the queue when it is a control; whether it was."""
        if not self._controls.intercepts(record.message, view):
            return False
        if self._stopping and not self._controls.stops(record.message):
            return False  # pending in the journal for the next start
        self._control(record, view)
        return True

    def _control(self, record: InboundRecord, view: SessionView) -> None:
        key, session = view.key, self._session(view.key)
        session.controls += 1
        task = asyncio.create_task(self._controls.handle(record, view), name="control")
        self._control_tasks.add(task)

        def done(task: asyncio.Task[None]) -> None:
            self._control_tasks.discard(task)
            session.controls -= 1
            if self._sessions.get(key) is session:
                self._ensure_worker(key, session)  # it releases the session if nothing is left

        task.add_done_callback(done)

    def stop_parked(self, key: str) -> OpenTurn | None:
        """Resume the session's parked turn (or the turn a crash cut short) only to close
        it as stopped."""
        session = self._sessions.get(key)
        if session is None or (session.parked is None and session.resume is None):
            return None
        if session.parked is not None:
            session.resume, session.parked = session.parked, None
        turn = session.resume
        session.stop_parked = True
        self._ensure_worker(key, session)
        return turn

    def adopt(self, key: str, backlog: SessionBacklog) -> None:
        """This node now holds the session: take on what it has open."""
        session = self._session(key)
        session.held = True
        self._merge(key, session, backlog)
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

    def _merge(self, key: str, session: _Session, backlog: SessionBacklog) -> None:
        for turn in backlog.running:
            session.seen.update(record.id for record in turn.records)
            if turn.id in backlog.parked:
                self._park(session, turn)
            elif session.resume is None:
                session.resume = turn
        view = SessionView(self, key)
        pending = [r for r in backlog.pending if r.id not in session.seen]
        session.seen.update(r.id for r in pending)
        pending = [r for r in pending if not self._intercepted(r, view)]
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
                self._merge(key, session, backlog)
                # a control among its messages (a /stop for the turn left running) acts
                # before that turn is resumed
                await asyncio.sleep(0)
            while (batch := self._next_batch(key, session)) is not None:
                async with self._slots:
                    session.running, session.batch = True, batch
                    session.idle.clear()
                    self._load.running += 1
                    fence = FENCE.set(self._claims.fence(key))  # the turn's writes carry it
                    try:
                        parked = await self._execute(batch)
                    except StaleClaim as exc:  # another node took the session: its work now
                        log.warning("session %s: %s; leaving it to that node", key, exc)
                        self._drop(session)
                        parked = None
                    finally:
                        FENCE.reset(fence)
                        session.running, session.batch = False, None
                        session.idle.set()
                        self._load.running -= 1
                        self._load.turns_run += 1
                if parked is not None:
                    self._park(session, parked)
        finally:
            session.task = None
            if session.has_work():
                self._ensure_worker(key, session)  # not while stopping
            elif (
                self._sessions.get(key) is session
                and session.parked is None
                and not session.controls
            ):
                del self._sessions[key]
                self._load.sessions.discard(key)
                if session.held:
                    self._claims.release(key)

    def _next_batch(self, key: str, session: _Session) -> TurnBatch | None:
        if session.resume is not None:
            turn, session.resume = session.resume, None
            woken, session.woken = session.woken, False
            stopped, session.stop_parked = session.stop_parked or turn.stop_requested, False
            start = TurnStart.WOKEN if woken else TurnStart.RESUMED
            return TurnBatch(
                key,
                turn.id,
                turn.records,
                start,
                control=self._control_of(key, turn.id, turn.records),
                stopped=stopped,
            )
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
            while _joins(session.queue, first.message):
                records.append(session.queue.popleft())
        turn_id = new_id()
        control = self._control_of(key, turn_id, records)
        return TurnBatch(key, turn_id, tuple(records), control=control)

    def _control_of(
        self, key: str, turn_id: str, records: Sequence[InboundRecord]
    ) -> TurnControl | None:
        """The handle of a chat turn; the ones a scheduled run or a task result make have
        none (nobody stops or steers them)."""
        if not records:
            return None
        last = records[-1].message
        session = self._sessions.get(key)
        # only what arrives once the turn runs joins it; what waited already has its turn
        after = max((r.id for r in session.queue), default=0) if session else 0

        def followups() -> list[tuple[int, InboundMessage]]:
            return [(r.id, r.message) for r in self._take_followups(key, after, last)]

        starter = last.person or f"{last.channel}:{last.sender_id}"  # their person's key
        return TurnControl(turn_id, key, starter, followups=followups)

    def _take_followups(self, key: str, after: int, last: InboundMessage) -> list[InboundRecord]:
        """The messages at the head of the session's queue that arrived once its turn ran
        (journal ids above ``after``), up to the first command or the first from another
        chat: they join the running turn (a command waits for a turn of its own)."""
        session = self._sessions.get(key)
        taken: list[InboundRecord] = []
        while session is not None and _joins(session.queue, last):
            if session.queue[0].id <= after:
                break
            taken.append(session.queue.popleft())
        return taken

    @staticmethod
    def _drop(session: _Session) -> None:
        """Forget what the session has open here (another node holds it now, with the same
        work from the journal)."""
        session.queue.clear()
        session.scheduled.clear()
        session.resume = session.parked = None

    async def _execute(self, batch: TurnBatch) -> OpenTurn | None:
        try:
            return await asyncio.wait_for(self._handler.handle(batch), self._hard_limit)
        except (asyncio.CancelledError, StaleClaim):
            raise
        except Exception as exc:  # a bug or a hang in the handler: close the turn visibly
            log.exception("turn for %s failed in the handler", batch.session_key)
            try:
                await self._handler.abandon(batch, exc)
            except Exception:
                log.exception("could not close the failed turn for %s", batch.session_key)
        return None
