"""This node in a cluster on PostgreSQL: its row with a heartbeat, and the leader lock.

Every ``switchboard run`` on the same database is a node. A node registers in
``cluster_nodes`` and then waits for the cluster's leader lock, a session-level advisory
lock on a connection of its own: the node holding it is the leader and does the work; the
others are standbys, trying again every ``interval`` seconds. The server releases the lock
the moment the leader's connection ends (the process died, ``kill -9`` included), so a
standby takes over within about one interval and resumes the open turns from the journal.

A node that cannot renew its heartbeat within ``2 × interval`` (the database or the
network is gone) rides it out: it pauses (:attr:`Membership.degraded`; it stops leading, its
locks are gone or going: it closes the connection), reconnects with capped, jittered backoff
and carries on without a restart (:attr:`Membership.generation` counts the connections, so
the claims can take their sessions' locks again). A node that led takes the leader lock back
at once if nobody took it meanwhile, keeping its platform connections; if another node leads
by then it calls ``on_lost`` and must stop (its supervisor starts it again as a standby),
so there is never a second receiver. A standby that reconnects leaves the lead to the node
that had it for a few intervals. Writes of turns that lost their session meanwhile are
refused by the database (gateway/store/cluster/fencing.py).

Every node (the leader too) runs turns: a session is held by one node at a time through a
session-level advisory lock on the same connection (:meth:`Membership.try_lock_many`, keyed by a
64-bit hash of the session key), so a node that dies loses its sessions together with its
leader lock, and a node that loses the database fences itself the same way (``working``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import random
import time
from collections.abc import Callable
from typing import Any

import psycopg

from gateway.core.errors import AnotherInstanceRunning, StoreUnavailable
from gateway.core.lifecycle import Service
from gateway.core.load import NodeLoad
from gateway.store.cluster.nodes import NODES_TABLE, sessions_report
from gateway.store.engine.postgres import CONNECT_TIMEOUT, redacted
from gateway.store.engine.schema_pg import MIGRATION_LOCK, PG_MIGRATIONS
from gateway.store.engine.sql import Statement

log = logging.getLogger(__name__)

# pg_try_advisory_lock key of the cluster's leader ("SWBDLEAD" as a number)
LEADER_LOCK = 0x5357_4244_4C45_4144
# forget nodes silent for this long (their rows only feed `switchboard status`)
FORGET_AFTER = 3_600.0
MAX_BACKOFF = 10.0  # seconds between two attempts to reach the database again, at most


def name_lock(name: str) -> int:
    """The advisory lock that holds a node's name: a signed 64-bit hash of it."""
    digest = hashlib.sha256(f"switchboard node name {name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class Membership(Service):
    def __init__(
        self,
        url: str,
        name: str,
        *,
        host: str,
        pid: int,
        interval: float = 1.0,
        on_lost: Callable[[], None] = lambda: None,
        load: NodeLoad | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.url = url
        self.name = name
        self._host = host
        self._pid = pid
        self._interval = interval
        self._on_lost = on_lost
        self._clock = clock
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._backend_pid = 0  # the server process of that connection: it holds the locks
        self._backend_start = ""  # ... and when it started (a pid may be used again)
        self._beat: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()  # one statement at a time on the connection
        self.leading = False
        self.working = False  # runs turns: must stop at once when the database is gone
        self.waiting = asyncio.Event()  # set once this node found another one leading
        self.lost = asyncio.Event()  # must stop: another node leads now, or newer code
        self.why_lost = "lost the database while leading and another node leads now"
        self.degraded = asyncio.Event()  # set while the database is out of reach
        self.resumed = asyncio.Event()  # set once it is back after an outage (and working)
        self.generation = 0  # connections made so far (a reconnection makes the next)
        self._hold_off_until = 0.0  # (monotonic) a standby back from an outage waits
        self.live_nodes = 1  # nodes with a fresh heartbeat, as of the last one
        # the sessions this node holds and the turns it ran, for `switchboard status`
        self._load = load or NodeLoad()

    async def start(self) -> None:
        await self._connect()
        self._beat = asyncio.create_task(self._heartbeat(), name="cluster-heartbeat")

    async def _connect(self) -> None:
        """Open the node's connection and register the node (a standby until it leads)."""
        try:
            self._conn = await psycopg.AsyncConnection.connect(
                self.url,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT,
                application_name=f"switchboard node {self.name}"[:63],
                keepalives=1,
                keepalives_idle=5,
                keepalives_interval=2,
                keepalives_count=2,
            )
        except psycopg.Error as exc:
            raise StoreUnavailable(
                f"cannot reach PostgreSQL at storage.url = {redacted(self.url)}: {str(exc).strip()}"
            ) from exc
        conn = self._conn
        self._backend_pid = conn.info.backend_pid
        row = await (
            await conn.execute(
                "SELECT backend_start::text FROM pg_stat_activity WHERE pid = %s",
                [self._backend_pid],
            )
        ).fetchone()
        self._backend_start = "" if row is None else str(row[0])
        # the server notices a vanished node within seconds too (its lock goes with it)
        for setting, value in (("idle", 5), ("interval", 2), ("count", 2)):
            await conn.execute(f"SET tcp_keepalives_{setting} = {value}")
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", [MIGRATION_LOCK])
            await conn.execute(NODES_TABLE)
        # The name is this process's while its connection lives: a second node started
        # with the same name would overwrite the first one's row (and delete it when it
        # stops), so it is refused. A crashed node's lock goes with its connection.
        cursor = await conn.execute("SELECT pg_try_advisory_lock(%s)", [name_lock(self.name)])
        held = await cursor.fetchone()
        if held is None or not held[0]:
            await conn.close()
            self._conn = None
            raise AnotherInstanceRunning(
                f"a running node is already called {self.name!r} on this database; give "
                "this one another name (node.name / SWITCHBOARD_NODE__NAME)"
            )
        now = self._clock()
        await conn.execute(
            "DELETE FROM cluster_nodes WHERE heartbeat_at < %s", [now - FORGET_AFTER]
        )
        await conn.execute(
            "INSERT INTO cluster_nodes (name, host, pid, role, started_at, heartbeat_at)"
            " VALUES (%s, %s, %s, 'standby', %s, %s) ON CONFLICT (name) DO UPDATE SET"
            " host = excluded.host, pid = excluded.pid, role = 'standby',"
            " started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at",
            [self.name, self._host, self._pid, now, now],
        )
        cursor = await conn.execute(
            "SELECT COUNT(*) FROM cluster_nodes WHERE heartbeat_at > %s", [now - 3 * self._interval]
        )
        row = await cursor.fetchone()
        self.live_nodes = max(1, int(row[0])) if row is not None else 1
        self.generation += 1

    async def leader(self) -> str | None:
        """The name of the node leading now (by its row), if any."""
        row = await self._query(
            "SELECT name FROM cluster_nodes WHERE role = 'leader' ORDER BY heartbeat_at DESC"
        )
        return None if row is None else str(row[0])

    async def lead(self) -> None:
        """Wait until this node holds the leader lock (returns at once when free)."""
        announced = False
        while not self.leading:
            if not self.degraded.is_set() and time.monotonic() >= self._hold_off_until:
                try:
                    if await self._take_lead():
                        return
                except StoreUnavailable as exc:  # the heartbeat rides it out
                    log.info("node %s: cannot try to lead now: %s", self.name, exc)
            if not announced:
                with contextlib.suppress(StoreUnavailable):
                    log.info("node %s is a standby (leader: %s)", self.name, await self.leader())
                announced = True
                self.waiting.set()
            await asyncio.sleep(self._interval)

    async def _take_lead(self) -> bool:
        """Take the leader lock if it is free; whether this node leads now."""
        row = await self._query("SELECT pg_try_advisory_lock(%s)", [LEADER_LOCK])
        if row is None or not row[0]:
            return False
        await self._query(
            "UPDATE cluster_nodes SET role = CASE WHEN name = %s THEN 'leader'"
            " ELSE 'gone' END, heartbeat_at = CASE WHEN name = %s THEN %s"
            " ELSE heartbeat_at END WHERE name = %s OR role = 'leader' RETURNING name",
            [self.name, self.name, self._clock(), self.name],
        )  # the node that led before is gone: it held the lock until it died
        self.leading = True
        log.info("node %s leads the cluster", self.name)
        return True

    def leads(self) -> Statement:
        """The condition "this node holds the leader lock right now", as SQL for another
        connection (the store's) and its values: the outbox finds a row to mark as being
        sent only where it holds, in the same statement, so a node that lost the lead (its
        membership connection ended, even before it noticed) never starts another send.

        The lock is a session lock this node took on its membership connection and never
        releases while that connection lives, so it holds exactly while the server
        process of that connection does (the same pid, started at the same instant).
        Asked of the server's list of its processes, not of ``pg_locks``: that copies
        every lock of the server, and in a cluster every session a node runs is one."""
        if not self.leading:
            return ("1 = 0", ())
        return (
            "EXISTS (SELECT 1 FROM pg_stat_get_activity(?) WHERE backend_start = ?::timestamptz)",
            (self._backend_pid, self._backend_start),
        )

    async def stop(self) -> None:
        beat, self._beat = self._beat, None
        if beat is not None:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
        conn, self._conn = self._conn, None
        if conn is None:
            return
        with contextlib.suppress(psycopg.Error):
            async with asyncio.timeout(self._interval * 2):
                await conn.execute("DELETE FROM cluster_nodes WHERE name = %s", [self.name])
        with contextlib.suppress(psycopg.Error):
            await conn.close()  # ends the session: the leader lock goes with it
        self.leading = False

    async def try_lock_many(self, keys: list[int]) -> set[int]:
        """Take the free advisory locks of ``keys`` for this node, in one round trip; returns
        those taken."""
        if not keys:
            return set()
        rows = await self._rows(
            "SELECT k FROM unnest(%s::bigint[]) AS k WHERE pg_try_advisory_lock(k)", [keys]
        )
        return {int(k) for (k,) in rows}

    async def locked(self) -> set[int]:
        """The advisory lock keys held now in this database, by any node."""
        rows = await self._rows(
            "SELECT classid::bigint, objid::bigint FROM pg_locks WHERE locktype = 'advisory'"
            " AND objsubid = 1 AND granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
        keys = set()
        for high, low in rows:
            key = (int(high) << 32) | int(low)
            keys.add(key - (1 << 64) if key >= 1 << 63 else key)
        return keys

    async def unlock_many(self, keys: list[int]) -> None:
        """Release advisory locks of this node, in one round trip (a key twice: unlocked
        twice, as taken twice)."""
        if keys:
            await self._rows("SELECT pg_advisory_unlock(k) FROM unnest(%s::bigint[]) AS k", [keys])

    async def _query(self, sql: str, params: list[Any] | None = None) -> Any:
        rows = await self._rows(sql, params)
        return rows[0] if rows else None

    async def _rows(self, sql: str, params: list[Any] | None = None) -> list[Any]:
        """One statement on the node's connection; a lost connection is ``StoreUnavailable``
        (the heartbeat fences the node)."""
        if self._conn is None:
            raise StoreUnavailable("this node has left the cluster")
        try:
            async with self._lock:
                cursor = await self._conn.execute(sql, params)
                return await cursor.fetchall() if cursor.description is not None else []
        except psycopg.Error as exc:
            raise StoreUnavailable(f"node {self.name}: {str(exc).strip()}") from exc

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                sessions, turns = sorted(self._load.sessions), self._load.turns_run
                now = self._clock()
                async with asyncio.timeout(self._interval * 2):
                    await self._query(
                        "UPDATE cluster_nodes SET heartbeat_at = %s, sessions = %s, turns = %s"
                        " WHERE name = %s",
                        [now, sessions_report(sessions), turns, self.name],
                    )
                    row = await self._query(
                        "SELECT COUNT(*), (SELECT max(version) FROM schema_version)"
                        " FROM cluster_nodes WHERE heartbeat_at > %s",
                        [now - 3 * self._interval],
                    )
                self.live_nodes = max(1, int(row[0]))
                if row[1] is not None and int(row[1]) > len(PG_MIGRATIONS):
                    self._outdated(int(row[1]))
                    return
            except (psycopg.Error, TimeoutError, StoreUnavailable) as exc:
                if not (self.leading or self.working):
                    log.warning("node %s: heartbeat failed: %s", self.name, exc)
                    continue
                if not await self._ride_out(exc):
                    return

    def _outdated(self, version: int) -> None:
        """A newer Switchboard migrated the database: this node's code may misread it and
        must do no more work (its sessions go to the newer nodes, the lead too)."""
        self.why_lost = (
            f"node {self.name}: a newer Switchboard migrated the database to schema version "
            f"{version}; this node knows versions up to {len(PG_MIGRATIONS)} and stops: "
            'upgrade it (docs/scaling.md, "Rolling upgrade")'
        )
        log.critical("%s", self.why_lost)
        self.working = False
        self.lost.set()
        self._on_lost()

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error, OSError):
                await conn.close()

    async def _ride_out(self, exc: BaseException) -> bool:
        """Pause, reconnect with backoff, resume; ``False`` when this node led and another
        node leads now (``on_lost``: it must stop)."""
        led, self.leading = self.leading, False
        self.resumed.clear()
        self.degraded.set()
        log.warning("node %s lost the database (%s): pausing until it is back", self.name, exc)
        await self._drop()  # its locks go with it, if the server still holds them
        delay = self._interval / 2
        # The node that led keeps trying every half interval: back within a second of the
        # database, it takes the lead again before the standbys' hold-off (three intervals
        # after their own return) ends. With the standbys' backoff it could come back
        # seconds after one of them had taken over while its receivers still ran.
        most = self._interval / 2 if led else MAX_BACKOFF
        while True:
            try:
                await self._connect()
            except AnotherInstanceRunning:
                # this node's own session, cut, may hold its name a moment longer while the
                # server ends it: not another node, so wait for it like for the server
                log.info("node %s: its previous connection is still ending", self.name)
                await self._drop()
            except (StoreUnavailable, psycopg.Error, OSError) as failure:
                log.info("node %s: database still out of reach: %s", self.name, failure)
                await self._drop()
            else:
                break
            await asyncio.sleep(random.uniform(delay / 2, delay))  # noqa: S311 - jitter
            delay = min(delay * 2, most)
        if led and not await self._take_lead():
            log.critical(
                "node %s: the database is back but another node leads now: this node stops",
                self.name,
            )
            self.working = False
            self.lost.set()
            self._on_lost()
            return False
        if not led:  # leave the lead to the node that had it, if it comes back too
            self._hold_off_until = time.monotonic() + 3 * self._interval
        self.degraded.clear()
        self.resumed.set()
        log.warning("node %s: the database is back; resuming", self.name)
        return True
