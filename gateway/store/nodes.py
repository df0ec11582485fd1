"""The nodes of a cluster as the store records them (PostgreSQL only; see
:mod:`gateway.store.membership`): one row per node with its role and last heartbeat.

The table is not part of the numbered migrations: it holds only who is alive now, is created
(``IF NOT EXISTS``) by the first node that joins, and a SQLite store has none.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gateway.store.db import Database
from gateway.store.sql import Connection

NODES_TABLE = """
CREATE TABLE IF NOT EXISTS cluster_nodes (
    name TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    role TEXT NOT NULL,                          -- standby | leader
    started_at DOUBLE PRECISION NOT NULL,
    heartbeat_at DOUBLE PRECISION NOT NULL
)
"""


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    host: str
    pid: int
    role: str  # standby | leader
    started_at: float
    heartbeat_at: float

    def to_dict(self, now: float) -> dict[str, Any]:
        return {**asdict(self), "heartbeat_age": round(max(0.0, now - self.heartbeat_at), 1)}


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
                "SELECT name, host, pid, role, started_at, heartbeat_at FROM cluster_nodes"
                " ORDER BY role = 'leader' DESC, name"
            )
            return [NodeInfo(n, h, int(p), r, float(s), float(b)) for n, h, p, r, s, b in rows]

        return await self._db.run(query, durable=False)
