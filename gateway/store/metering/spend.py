"""The owner's notices about money caps (50, 80 and 100 % of a cap), each sent once.

A notice is claimed and queued in one transaction: its row (cap, period, level) is inserted
unless it exists, and only a new row queues the message. So a restart neither repeats nor
loses one (the outbox delivers what was queued), and of the nodes of a cluster that see a
cap pass a level together exactly one queues its notice: the store is the truth.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from gateway.core.messages import OutboundMessage
from gateway.store.engine.db import Database
from gateway.store.engine.retention import delete_batched
from gateway.store.engine.sql import Connection
from gateway.store.outbox import Outbox


class SpendNotices:
    def __init__(self, db: Database, outbox: Outbox, *, clock: Callable[[], float] = time.time):
        self._db = db
        self._outbox = outbox
        self._clock = clock

    async def told(self, cap: str, period: str) -> set[int]:
        """The levels of ``cap`` already told for ``period``."""

        def query(conn: Connection) -> set[int]:
            rows = conn.execute(
                "SELECT level FROM spend_notices WHERE cap = ? AND period = ?", (cap, period)
            )
            return {int(level) for (level,) in rows}

        return await self._db.run(query, durable=False)

    async def claim(
        self, cap: str, period: str, levels: Sequence[int], notice: OutboundMessage | None
    ) -> list[int]:
        """Record ``levels`` of ``cap`` in ``period`` as told; when any of them is new,
        queue ``notice`` with them. Returns the levels this call recorded."""
        now = self._clock()

        def insert(conn: Connection) -> list[int]:
            new = []
            for level in levels:
                cursor = conn.execute(
                    "INSERT INTO spend_notices (cap, period, level, at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (cap, period, level) DO NOTHING",
                    (cap, period, level, now),
                )
                if cursor.rowcount == 1:
                    new.append(level)
            if new and notice is not None:
                self._outbox.enqueue_statement(conn, [notice])
            return new

        return await self._db.run(insert)

    async def prune(self, before: float) -> int:
        """Forget notices told before ``before`` (their day or month is over)."""
        return await delete_batched(self._db, "spend_notices", "at < ?", [before])
