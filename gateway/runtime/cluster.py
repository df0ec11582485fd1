"""Who may do the work of a home: one process (SQLite), or the leader of a cluster
(PostgreSQL).

With the SQLite file, a ``flock`` on the data directory keeps a second process out
(:class:`LocalGuard`). With ``storage.url`` on PostgreSQL every ``switchboard run`` is a
node (:class:`ClusterGuard`): it registers (:meth:`Guard.acquire`) and runs turns at once
(:mod:`gateway.runtime.cluster_work`), then waits until it holds the cluster's leader lock
(:meth:`Guard.lead`) before it starts the rest: channels (so each platform connection has one
receiver), the outbox workers and the scheduler (so heartbeat and cron fire once). When the
leader dies, another node leads within seconds; the sessions of any node that dies are
resumed by the others from the journal. A node that loses the database sets
:attr:`Guard.fenced` and must stop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import Protocol

from gateway.config.settings import Settings
from gateway.core.load import NodeLoad
from gateway.core.lock import ProcessLock

log = logging.getLogger(__name__)

LOCK_FILE = "switchboard.lock"


def node_name(settings: Settings) -> str:
    """``node.name`` (``SWITCHBOARD_NODE__NAME``), or host name and process id."""
    return settings.node.name or f"{socket.gethostname()}-{os.getpid()}"


class Guard(Protocol):
    fenced: asyncio.Event  # set when this process must stop working at once
    standby: asyncio.Event  # set while :meth:`acquire` waits for another node to go

    @property
    def why_fenced(self) -> str:
        """Why :attr:`fenced` was set, said to a person."""

    async def acquire(self) -> None:
        """Take the data directory (one process), or join the cluster."""

    async def lead(self) -> None:
        """Return once this process may receive, send and schedule (a cluster's leader)."""

    async def release(self) -> None: ...


class LocalGuard:
    """One process per data directory."""

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


class ClusterGuard:
    """This node of the cluster: runs turns, and receives, sends and schedules once it
    leads."""

    def __init__(
        self, settings: Settings, url: str, *, load: NodeLoad, interval: float = 1.0
    ) -> None:
        from gateway.store.membership import Membership  # noqa: PLC0415 - psycopg when used

        self.fenced = asyncio.Event()
        self.membership = Membership(
            url,
            node_name(settings),
            host=socket.gethostname(),
            pid=os.getpid(),
            interval=interval,
            on_lost=self.fenced.set,
            load=load,
        )
        self.standby = self.membership.waiting

    @property
    def why_fenced(self) -> str:
        return self.membership.why_lost

    async def acquire(self) -> None:
        await self.membership.start()
        self.membership.working = True  # runs turns from now on: fences itself if cut off

    async def lead(self) -> None:
        await self.membership.lead()

    async def release(self) -> None:
        await self.membership.stop()


def guard_for(settings: Settings, load: NodeLoad) -> Guard:
    url = settings.storage.database_url()
    if url is None:
        return LocalGuard(settings)
    return ClusterGuard(settings, url, load=load)
