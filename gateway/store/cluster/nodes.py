"""The nodes of a cluster as the store records them (PostgreSQL only; see
:mod:`gateway.store.cluster.membership`): one row per node with its role and last heartbeat.

The table is not part of the numbered migrations: it holds only who is alive now, is created
(``IF NOT EXISTS``) by the first node that joins, and a SQLite store has none.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Literal

from gateway.store.engine.db import Database
from gateway.store.engine.sql import Connection

NODES_TABLE = """
CREATE TABLE IF NOT EXISTS cluster_nodes (
    name TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    role TEXT NOT NULL,                          -- standby | leader | gone
    started_at DOUBLE PRECISION NOT NULL,
    heartbeat_at DOUBLE PRECISION NOT NULL
);
ALTER TABLE cluster_nodes ADD COLUMN IF NOT EXISTS sessions TEXT NOT NULL DEFAULT '[]';
ALTER TABLE cluster_nodes ADD COLUMN IF NOT EXISTS turns BIGINT NOT NULL DEFAULT 0
"""
# at most this many session keys per node in its row (``sessions_in_flight`` counts all)
LISTED_SESSIONS = 100
# A node whose heartbeat (every second) is older than this is not running any more: killed,
# or cut off from the database (its row stays until the next start forgets it).
STALE_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    host: str
    pid: int
    role: Literal["standby", "leader", "gone"]  # gone: led until it died (forgotten after an hour)
    started_at: float
    heartbeat_at: float
    sessions: tuple[str, ...] = ()  # the sessions this node holds now (turns in flight)
    sessions_in_flight: int = 0
    turns: int = 0  # turns this node ran since it started
    connections: int = 0  # its open connections to the database (store, membership, listener)

    def alive(self, now: float) -> bool:
        """Whether it runs now: it has not left, and its heartbeat is fresh."""
        return self.role != "gone" and now - self.heartbeat_at <= STALE_SECONDS

    def to_dict(self, now: float) -> dict[str, Any]:
        data = asdict(self)
        data["sessions"] = list(self.sessions)
        age = round(max(0.0, now - self.heartbeat_at), 1)
        return {**data, "heartbeat_age": age, "alive": self.alive(now)}


def sessions_report(sessions: list[str]) -> str:
    """The ``sessions`` column: how many, and the first :data:`LISTED_SESSIONS` keys."""
    return json.dumps({"count": len(sessions), "keys": sorted(sessions)[:LISTED_SESSIONS]})


def _sessions(text: str) -> tuple[tuple[str, ...], int]:
    data = json.loads(text or "[]")
    if isinstance(data, list):
        return tuple(data), len(data)
    return tuple(data.get("keys", ())), int(data.get("count", 0))


class Nodes:
    """Reading the node table (the nodes write it through their own connection)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def listing(self) -> list[NodeInfo]:
        """Every node that registered, leader first; none on SQLite."""
        if self._db.dialect.name != "postgresql":
            return []

        def query(conn: Connection) -> list[NodeInfo]:
            (exists,) = conn.execute("SELECT to_regclass('cluster_nodes') IS NOT NULL").fetchone()
            if not exists:
                return []
            rows = conn.execute(
                "SELECT name, host, pid, role, started_at, heartbeat_at, sessions, turns,"
                " (SELECT COUNT(*) FROM pg_stat_activity a WHERE a.datname = current_database()"
                " AND a.application_name IN (left('switchboard store ' || name, 63),"
                " left('switchboard node ' || name, 63), left('switchboard listener ' || name,"
                " 63))) FROM cluster_nodes ORDER BY role = 'leader' DESC, name"
            )
            return [
                NodeInfo(n, h, int(p), r, float(s), float(b), *_sessions(k), int(t), int(c))
                for n, h, p, r, s, b, k, t, c in rows
            ]

        return await self._db.run(query, durable=False)
