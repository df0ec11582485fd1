"""Who may do the work of a home: one process (SQLite), or the leader of a cluster
(PostgreSQL).

With the SQLite file, a ``flock`` on the data directory keeps a second process out
(:class:`LocalGuard`). With ``storage.url`` on PostgreSQL every ``switchboard run`` is a
node (:class:`ClusterGuard`): it registers, waits as a standby until it holds the cluster's
leader lock, and only then starts the work: channels (so each platform connection has one
receiver), the dispatcher, the outbox workers and the scheduler (so heartbeat and cron fire
once). When the leader dies, a standby takes over within seconds and resumes the open turns
from the journal. A leader that loses the database sets :attr:`Guard.fenced` and must stop.
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Protocol

from gateway.config.settings import Settings
from gateway.core.lock import ProcessLock

LOCK_FILE = "switchboard.lock"


def node_name(settings: Settings) -> str:
    """``node.name`` (``SWITCHBOARD_NODE__NAME``), or host name and process id."""
    return settings.node.name or f"{socket.gethostname()}-{os.getpid()}"


class Guard(Protocol):
    fenced: asyncio.Event  # set when this process must stop working at once
    standby: asyncio.Event  # set while :meth:`acquire` waits for another node to go

    async def acquire(self) -> None: ...

    async def release(self) -> None: ...


class LocalGuard:
    """One process per data directory."""

    def __init__(self, settings: Settings) -> None:
        self._lock = ProcessLock(settings.data_dir / LOCK_FILE)
        self.fenced = asyncio.Event()  # never set: nobody else can take over
        self.standby = asyncio.Event()  # never set: a second process is refused instead

    async def acquire(self) -> None:
        self._lock.acquire()

    async def release(self) -> None:
        self._lock.release()


class ClusterGuard:
    """This node of the cluster: a standby until it leads."""

    def __init__(self, settings: Settings, url: str, *, interval: float = 1.0) -> None:
        from gateway.store.membership import Membership  # noqa: PLC0415 - psycopg when used

        self.fenced = asyncio.Event()
        self.membership = Membership(
            url,
            node_name(settings),
            host=socket.gethostname(),
            pid=os.getpid(),
            interval=interval,
            on_lost=self.fenced.set,
        )
        self.standby = self.membership.waiting

    async def acquire(self) -> None:
        await self.membership.start()
        try:
            await self.membership.lead()
        except BaseException:
            await self.membership.stop()
            raise

    async def release(self) -> None:
        await self.membership.stop()


def guard_for(settings: Settings) -> Guard:
    url = settings.storage.database_url()
    if url is None:
        return LocalGuard(settings)
    return ClusterGuard(settings, url)
