"""Who may do the work of a home, and how work reaches the dispatcher: one process (SQLite),
or a node of a cluster (PostgreSQL).

With the SQLite file, a ``flock`` on the data directory keeps a second process out
(:class:`LocalGuard`). With ``storage.url`` on PostgreSQL every ``switchboard run`` is a
node (:class:`gateway.runtime.cluster.node.ClusterGuard`): it registers
(:meth:`Guard.acquire`) and runs turns at once (:mod:`gateway.runtime.cluster.work`), then
waits until it holds the cluster's leader lock (:meth:`Guard.lead`) before it starts the
rest: channels (so each platform connection has one receiver), the outbox workers and the
scheduler (so heartbeat and cron fire once). When the leader dies, another node leads within
seconds; the sessions of any node that dies are resumed by the others from the journal. A
node that loses the database sets :attr:`Guard.fenced` and must stop.

This is the one seam between the two: the composition root asks the guard for the claims
sessions run under, the intake that feeds the dispatcher, the fence a send is checked
against, which channels receive before the process leads, and whether it is the only
process of its home; it never asks which kind it has.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from gateway.config.settings import Settings
from gateway.core.channel import Channel
from gateway.core.lifecycle import Service
from gateway.core.messages import InboundMessage
from gateway.core.system.lock import ProcessLock
from gateway.runtime.bus import Bus
from gateway.runtime.dispatch.dispatcher import Claims, Dispatcher, LocalClaims
from gateway.runtime.intake.local import Intake
from gateway.runtime.turns.approvals import Approvals
from gateway.store import Store
from gateway.store.outbox import Fence

LOCK_FILE = "switchboard.lock"

WaitingTurns = Callable[[], Awaitable[set[str]]]  # turns parked for an approval


@dataclass(frozen=True, slots=True)
class WorkSources:
    """What the intake (one process's, or a cluster node's work) takes work from."""

    bus: Bus
    store: Store
    approvals: Approvals
    session_of: Callable[[InboundMessage], str]  # routing: the session a message joins
    channels: Sequence[str]
    max_sessions: int
    people_changed: Callable[[str], None]  # a person's own settings were stored elsewhere
    task_stopped: Callable[[str], None]  # a background task was stopped elsewhere


class Guard(Protocol):
    fenced: asyncio.Event  # set when this process must stop working at once
    standby: asyncio.Event  # set while :meth:`acquire` waits for another node to go

    @property
    def why_fenced(self) -> str:
        """Why :attr:`fenced` was set, said to a person."""

    @property
    def single_process(self) -> bool:
        """Whether every message of the home is this process's (the bus hands it to the
        intake in-process, and a background task cut short resumes here)."""

    async def acquire(self) -> None:
        """Take the data directory (one process), or join the cluster."""

    async def lead(self) -> None:
        """Return once this process may receive, send and schedule (a cluster's leader)."""

    async def release(self) -> None: ...

    def claims(
        self,
        store: Store,
        session_of: Callable[[InboundMessage], str],
        waiting_turns: WaitingTurns,
    ) -> Claims:
        """Which sessions' turns this process may run, and under which claim."""

    def intake(self, dispatcher: Dispatcher, sources: WorkSources) -> Service:
        """What feeds the dispatcher: journaled messages and approval decisions."""

    def send_fence(self) -> Fence | None:
        """The condition a send is marked under (``None``: always this process's)."""

    def receives_early(self, channel: Channel) -> bool:
        """Whether ``channel`` receives before this process leads."""

    def degraded(self) -> str | None:
        """Why this process is paused, riding out a problem it recovers from by itself."""


class LocalGuard:
    """One process per data directory: it holds every session and does all the work."""

    single_process = True

    def __init__(self, settings: Settings) -> None:
        self._lock = ProcessLock(settings.data_dir / LOCK_FILE)
        self.fenced = asyncio.Event()  # never set: nobody else can take over
        self.standby = asyncio.Event()  # never set: a second process is refused instead

    @property
    def why_fenced(self) -> str:
        return ""

    async def acquire(self) -> None:
        self._lock.acquire()

    async def lead(self) -> None:
        return

    async def release(self) -> None:
        self._lock.release()

    def claims(
        self,
        store: Store,
        session_of: Callable[[InboundMessage], str],
        waiting_turns: WaitingTurns,
    ) -> Claims:
        return LocalClaims()

    def intake(self, dispatcher: Dispatcher, sources: WorkSources) -> Service:
        return Intake(
            sources.bus,
            dispatcher,
            journal=sources.store.journal,
            approvals=sources.approvals,
            session_of=sources.session_of,
        )

    def send_fence(self) -> Fence | None:
        return None

    def receives_early(self, channel: Channel) -> bool:
        return False

    def degraded(self) -> str | None:
        return None
