"""Turns on every node of a cluster (PostgreSQL): who runs which session.

The leader receives (one receiver per platform connection) and journals each message; the
journal's ``NOTIFY`` wakes every node (:class:`~gateway.store.cluster.listener.Listener`), and each
looks at the pending messages (:meth:`ClusterWork.look`; also every ``poll`` seconds, in case
a notification was lost). A session is run by the node holding its lock, a session-level
advisory lock on the node's membership connection (:meth:`Membership.try_lock_many
<gateway.store.cluster.membership.Membership.try_lock_many>`): strictly one turn at a time per session
across the cluster, in journal order. A node takes at most its share per look: the sessions
in flight on every node (advisory locks held, from ``pg_locks``) plus the free ones, divided
by the live nodes, minus those it holds already (at least one), in random order, so a burst
spreads over the nodes; the rest are taken at the next look, by whichever node is quicker.

When a node dies its connection ends and the server releases its locks at once; the next
node to take such a session finds the turn left running and resumes it from its checkpoints
(:class:`~gateway.runtime.dispatch.dispatcher.SessionBacklog`), exactly as a restarted process does.
A session with nothing left to do is released (and the pending messages looked at again, so
a message that arrived during the release is not left waiting for the timer).

Two parts: :class:`ClusterClaims` is the dispatcher's :class:`~gateway.runtime.dispatch.dispatcher.Claims`
(the locks, and what a locked session has open); :class:`ClusterWork` looks for work and
hands it to the dispatcher, and carries wake-ups between the nodes.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence

from gateway.core.errors import StoreError
from gateway.core.lifecycle import Service
from gateway.core.messages import InboundMessage
from gateway.runtime.bus import Bus
from gateway.runtime.dispatch.dispatcher import Dispatcher, SessionBacklog
from gateway.store import Database, InboundRecord, Journal
from gateway.store.cluster.fencing import Fence
from gateway.store.cluster.listener import Listener
from gateway.store.cluster.membership import LEADER_LOCK, Membership
from gateway.store.engine.sql import (
    INBOUND_TOPIC,
    OUTBOX_TOPIC,
    PEOPLE_TOPIC,
    TASKS_TOPIC,
    WAKE_TOPIC,
)

log = logging.getLogger(__name__)

POLL_SECONDS = 2.0  # look for work even without a notification
HOLD_RETRY = 0.25  # a session another node holds: try again after this long
SCAN_LIMIT = 2000  # pending messages read per look


def session_lock(key: str) -> int:
    """The advisory lock key of a session: a 64-bit hash of its key."""
    digest = hashlib.blake2b(key.encode(), digest_size=8, person=b"sb-session").digest()
    return int.from_bytes(digest, "big", signed=True)


WaitingTurns = Callable[[], Awaitable[set[str]]]  # turns parked for an approval


class ClusterClaims:
    """Which sessions this node holds: a session-level advisory lock each, on the
    membership connection, taken with what the session has open."""

    def __init__(
        self,
        journal: Journal,
        membership: Membership,
        *,
        session_of: Callable[[InboundMessage], str],
        waiting_turns: WaitingTurns,
    ) -> None:
        self._journal = journal
        self._membership = membership
        self._session_of = session_of
        self._waiting_turns = waiting_turns
        self.looks = asyncio.Event()  # set: look at the pending messages soon (ClusterWork)
        self.held: set[str] = set()  # locked here, or being locked or unlocked
        self._locked: set[str] = set()  # locked here, its open work taken on
        self._epochs: dict[str, int] = {}  # the claim of each session locked here
        self._unlocks: asyncio.Queue[str] = asyncio.Queue()
        self._unlocking: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self._unlocking is None:
            self._unlocking = asyncio.create_task(self._unlock_forever(), name="cluster-unlock")

    async def stop(self) -> None:
        task, self._unlocking = self._unlocking, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    # -- Claims ---------------------------------------------------------------------------

    async def hold(self, key: str) -> SessionBacklog:
        while True:
            if key in self._locked:  # a look took it meanwhile, with its backlog
                return SessionBacklog()
            if key not in self.held and not self._membership.degraded.is_set():
                try:
                    backlog = (await self.try_hold({key: ()})).get(key)
                except StoreError as exc:
                    log.warning("cluster: could not claim session %s: %s", key, exc)
                    backlog = None
                if backlog is not None:
                    self.looks.set()  # its pending messages come with the next look
                    return backlog
            await asyncio.sleep(HOLD_RETRY)

    def release(self, key: str) -> None:
        self._locked.discard(key)
        self._epochs.pop(key, None)
        self._unlocks.put_nowait(key)

    def fence(self, key: str) -> Fence | None:
        epoch = self._epochs.get(key)
        return None if epoch is None else Fence(key, epoch)

    async def relock(self) -> None:
        """The membership connection was made again (the database came back): take the
        locks of the sessions held here again. One another node took meanwhile stays
        with it: this node's writes for it are refused (its epoch moved on)."""
        if not self._locked:
            return
        keys = {session_lock(key): key for key in self._locked}
        taken = await self._membership.try_lock_many(list(keys))
        lost = [keys[k] for k in keys if k not in taken]
        if lost:
            log.warning("cluster: %d session(s) were taken by other nodes meanwhile", len(lost))

    # -- locking --------------------------------------------------------------------------

    async def try_hold(self, sessions: Mapping[str, Sequence[str]]) -> dict[str, SessionBacklog]:
        """Lock the sessions (one round trip) and load what the locked ones have open (one
        store transaction: the jobs are group-committed). ``sessions``: the chat keys of
        the pending messages of each."""
        keys = {session_lock(key): key for key in sessions}
        self.held.update(sessions)
        try:
            locked = {keys[k] for k in await self._membership.try_lock_many(list(keys))}
        except BaseException:
            self.held.difference_update(sessions)
            raise
        self.held.difference_update(key for key in sessions if key not in locked)
        try:
            loaded = await asyncio.gather(
                *(self._load(key, sessions[key]) for key in locked), return_exceptions=True
            )
        except BaseException:
            for key in locked:
                self.release(key)
            raise
        taken: dict[str, SessionBacklog] = {}
        failure: BaseException | None = None
        for key, outcome in zip(locked, loaded, strict=True):
            if isinstance(outcome, BaseException):
                self.release(key)
                failure = outcome
            else:
                taken[key], self._epochs[key] = outcome
                self._locked.add(key)
        if failure is not None and not taken:
            raise failure
        return taken

    async def _load(self, key: str, chat_keys: Sequence[str]) -> tuple[SessionBacklog, int]:
        """What the session has open, loaded with a new claim (its epoch, returned too):
        from here on a node that held the session before can write nothing for it."""
        work = await self._journal.session_work(key, chat_keys, claim_by=self._membership.name)
        waiting = await self._waiting_turns() if work.running else set()
        backlog = SessionBacklog(
            running=work.running,
            parked=frozenset(t.id for t in work.running if t.id in waiting),
            pending=tuple(r for r in work.pending if self._session_of(r.message) == key),
        )
        return backlog, work.epoch

    async def _unlock_forever(self) -> None:
        while True:
            keys = [await self._unlocks.get()]
            while not self._unlocks.empty():  # a burst ending: released in one round trip
                keys.append(self._unlocks.get_nowait())
            try:
                await self._membership.unlock_many([session_lock(key) for key in keys])
            except StoreError as exc:  # the connection is gone: so are the locks (fenced)
                log.warning("cluster: could not release %d session(s): %s", len(keys), exc)
            self.held.difference_update(keys)
            self.looks.set()  # a message that arrived while they were held


class ClusterWork(Service):
    """This node's part of the turns: the look at pending messages, and the wake-ups from
    and to the other nodes."""

    def __init__(
        self,
        claims: ClusterClaims,
        dispatcher: Dispatcher,
        *,
        db: Database,
        journal: Journal,
        membership: Membership,
        bus: Bus,
        session_of: Callable[[InboundMessage], str],
        waiting_turns: WaitingTurns,
        channels: Sequence[str],
        max_sessions: int,
        people_changed: Callable[[str], None],
        task_stopped: Callable[[str], None],
        poll: float = POLL_SECONDS,
    ) -> None:
        self._claims = claims
        self._dispatcher = dispatcher
        self._db = db
        self._journal = journal
        self._membership = membership
        self._bus = bus
        self._session_of = session_of
        self._waiting_turns = waiting_turns
        self._looks = claims.looks
        self._channels = tuple(channels)
        self._max_sessions = max_sessions
        self._poll = poll
        self._pending: dict[int, InboundRecord] = {}  # as of the last look
        self._generation = membership.generation  # the membership connection looked with
        self._sweep = False  # a decision was announced: look at the parked turns
        self._tasks: list[asyncio.Task[None]] = []
        self._notes: set[asyncio.Task[None]] = set()
        self.listener = Listener(
            membership.url,
            {
                INBOUND_TOPIC: self._inbound,
                OUTBOX_TOPIC: self._outbound,
                WAKE_TOPIC: self._woken,
                PEOPLE_TOPIC: people_changed,  # what each node keeps of them is read again
                TASKS_TOPIC: task_stopped,  # the node running it stops its turn
            },
            name=membership.name,
        )

    async def start(self) -> None:
        if self._tasks:
            return
        await self._claims.start()
        self._tasks = [
            asyncio.create_task(self._looking(), name="cluster-look"),
            asyncio.create_task(self._decisions(), name="cluster-decisions"),
        ]
        await self.listener.start()
        self.look()

    async def stop(self) -> None:
        await self.listener.stop()
        tasks, self._tasks = self._tasks, []
        for task in [*tasks, *self._notes]:
            task.cancel()
        await asyncio.gather(*tasks, *self._notes, return_exceptions=True)
        await self._claims.stop()

    def look(self) -> None:
        """Look at the pending messages soon (coalesced)."""
        self._looks.set()

    # -- looking for work -----------------------------------------------------------------

    async def _looking(self) -> None:
        while True:
            timed_out = False
            try:
                async with asyncio.timeout(self._poll):
                    await self._looks.wait()
            except TimeoutError:
                timed_out = True
            self._looks.clear()
            again = False
            if self._membership.degraded.is_set():  # paused: the database is out of reach
                continue
            try:
                if self._generation != self._membership.generation:  # reconnected
                    self._generation = self._membership.generation
                    await self._claims.relock()
                    timed_out = True  # look at orphans and parked turns at once too
                again = await self._scan()
                if timed_out:
                    await self._adopt_orphans()
                if self._sweep or timed_out:
                    await self._wake_decided()
            except StoreError as exc:
                log.warning("cluster: looking for work failed: %s", exc)
            except Exception:  # a bug: log it, and look again at the next wake-up
                log.exception("cluster: looking for work failed")
            if again:  # leave the other nodes a moment to take their share
                await asyncio.sleep(random.uniform(0.02, 0.1))  # noqa: S311 - jitter
                self._looks.set()

    async def _scan(self) -> bool:
        """Queue new messages of held sessions, claim free ones; returns whether free
        sessions were left for the next look."""
        groups: dict[str, list[InboundRecord]] = {}
        pending = await self._journal.pending(SCAN_LIMIT, self._pending)
        self._pending = {record.id: record for record in pending}  # decoded once per node
        for record in pending:
            groups.setdefault(self._session_of(record.message), []).append(record)
        free: list[str] = []
        held = self._claims.held
        for key, records in groups.items():
            if self._dispatcher.has_session(key):
                self._dispatcher.enqueue(key, records)
            elif key not in held:
                free.append(key)
        if not free:
            return False
        # sessions another node holds are not free; of the rest this node takes its share
        locked = await self._membership.locked()
        free = [key for key in free if session_lock(key) not in locked]
        random.shuffle(free)
        in_flight = len(locked - {LEADER_LOCK})  # sessions in flight on every node
        share = math.ceil((len(free) + in_flight) / max(1, self._membership.live_nodes))
        budget = min(max(1, share - len(held)), self._max_sessions - len(held))
        if budget <= 0:
            return False
        wanted = {
            key: sorted({record.message.session_key for record in groups[key]})
            for key in free[:budget]
        }
        for key, backlog in (await self._claims.try_hold(wanted)).items():
            self._dispatcher.adopt(key, backlog)
        return len(free) > budget

    async def _adopt_orphans(self) -> None:
        """Take sessions whose turn was left running by a node that died (its lock went
        with it) and that have no new message to bring them to a node's attention."""
        running = [
            key
            for key in await self._journal.running_sessions()
            if key not in self._claims.held and not self._dispatcher.has_session(key)
        ]
        if not running:
            return
        locked = await self._membership.locked()
        for key in running:
            if session_lock(key) in locked:
                continue
            backlog = (await self._claims.try_hold({key: ()})).get(key)
            if backlog is not None:
                log.info("cluster: resuming session %s left by a node that stopped", key)
                self._dispatcher.adopt(key, backlog)
                self.look()  # its pending messages come with the next look

    async def _wake_decided(self) -> None:
        """Resume parked turns whose approval was decided (on any node)."""
        self._sweep = False
        parked = self._dispatcher.parked_turns()
        if not parked:
            return
        waiting = await self._waiting_turns()
        for turn_id in parked:
            if turn_id not in waiting:
                self._dispatcher.wake(turn_id, remember=False)

    # -- wake-ups -------------------------------------------------------------------------

    async def _decisions(self) -> None:
        """An approval decided here: resume the turn if it is parked here, else tell every
        node (this one included: a turn being parked right now is found parked by the time
        the notification comes back, or by the timer at the latest). Unlike one process,
        nothing is remembered for a turn not parked here: it may be parked on another node,
        or later parked again here."""
        while True:
            turn_id = await self._bus.next_wake()
            if not self._dispatcher.wake(turn_id, remember=False):
                task = asyncio.create_task(self._announce(turn_id))
                self._notes.add(task)
                task.add_done_callback(self._notes.discard)

    async def _announce(self, turn_id: str) -> None:
        try:
            await self._db.run(lambda conn: conn.notify(WAKE_TOPIC, turn_id), durable=False)
        except StoreError as exc:  # the other nodes look at their parked turns on a timer
            log.warning("cluster: could not announce a decision: %s", exc)

    def _inbound(self, _payload: str) -> None:
        self.look()

    def _outbound(self, channel: str) -> None:
        for name in (channel,) if channel else self._channels:
            self._bus.outbound_ready(name)

    def _woken(self, _payload: str) -> None:
        self._sweep = True
        self.look()
