"""The owner's notices about money caps (50, 80 and 100 % of a cap), each sent once.

A notice is claimed and queued in one transaction: its row (cap, period, level) is inserted
unless it exists, and only a new row queues the message. So a restart neither repeats nor
loses one (the outbox delivers what was queued), and of the nodes of a cluster that see a
cap pass a level together exactly one queues its notice: the store is the truth.

A notice claimed while the owner has no home chat is kept on its row instead (``waiting``:
what the runtime needs to write it) and queued once there is one (:meth:`SpendNotices.send`
takes it off the row in the transaction that queues it, so it is sent once). A newer level
of the same cap and period supersedes a notice still waiting.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.core.messages import OutboundMessage
from gateway.store.engine.db import Database
from gateway.store.engine.retention import delete_batched
from gateway.store.engine.sql import Connection
from gateway.store.outbox import Outbox


@dataclass(frozen=True, slots=True)
class WaitingNotice:
    """A notice kept until the owner has a home chat: ``level`` of ``cap`` in ``period``,
    and what it says (``detail``, as the runtime kept it)."""

    cap: str
    period: str
    level: int
    detail: Mapping[str, Any]


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
        self,
        cap: str,
        period: str,
        levels: Sequence[int],
        notice: OutboundMessage | None,
        *,
        waiting: Mapping[str, Any] | None = None,
    ) -> list[int]:
        """Record ``levels`` of ``cap`` in ``period`` as told; when any of them is new,
        queue ``notice`` with them, or keep ``waiting`` on the highest of them until the
        owner can be told (:meth:`waiting`). Returns the levels this call recorded."""
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
            if not new:
                return new
            conn.execute(  # a lower level still waiting is old news now
                "UPDATE spend_notices SET waiting = NULL"
                " WHERE cap = ? AND period = ? AND waiting IS NOT NULL",
                (cap, period),
            )
            if notice is not None:
                self._outbox.enqueue_statement(conn, [notice])
            elif waiting is not None:
                conn.execute(
                    "UPDATE spend_notices SET waiting = ? WHERE cap = ? AND period = ? AND level = ?",
                    (json.dumps(waiting), cap, period, max(new)),
                )
            return new

        return await self._db.run(insert)

    async def waiting(self) -> list[WaitingNotice]:
        """The notices kept until the owner has a home chat."""

        def query(conn: Connection) -> list[WaitingNotice]:
            rows = conn.execute(
                "SELECT cap, period, level, waiting FROM spend_notices"
                " WHERE waiting IS NOT NULL ORDER BY at"
            )
            return [
                WaitingNotice(str(cap), str(period), int(level), json.loads(detail))
                for cap, period, level, detail in rows
            ]

        return await self._db.run(query, durable=False)

    async def send(
        self, notices: Sequence[tuple[WaitingNotice, OutboundMessage | None]]
    ) -> list[WaitingNotice]:
        """Queue each waiting notice's message (``None``: dropped unsent) and keep it no
        longer, unless another process did first. Returns the ones this call queued."""

        def take(conn: Connection) -> list[WaitingNotice]:
            queued = []
            for waiting, message in notices:
                cursor = conn.execute(
                    "UPDATE spend_notices SET waiting = NULL"
                    " WHERE cap = ? AND period = ? AND level = ? AND waiting IS NOT NULL",
                    (waiting.cap, waiting.period, waiting.level),
                )
                if cursor.rowcount == 1 and message is not None:
                    self._outbox.enqueue_statement(conn, [message])
                    queued.append(waiting)
            return queued

        return await self._db.run(take)

    async def prune(self, before: float) -> int:
        """Forget notices told before ``before`` (their day or month is over)."""
        return await delete_batched(self._db, "spend_notices", "at < ?", [before])
