"""The platform messages an answer streamed by editing occupies, until the answer is final.

A channel that streams by editing posts a draft message as soon as the model writes, and
more when the answer outgrows one message. Each one's platform id is recorded here as soon
as the platform returns it, so that after a crash the outbox's final message is delivered by
editing those messages (and deleting any left over) rather than as a second copy. The rows
go in the same transaction that marks the final message sent (:meth:`Outbox.mark_sent`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gateway.store.db import Database
from gateway.store.sql import Connection

Clock = Callable[[], float]

FORGET_SQL = "DELETE FROM stream_drafts WHERE channel = ? AND chat_key = ? AND turn_id = ?"


class Drafts:
    def __init__(self, db: Database, *, clock: Clock = time.time) -> None:
        self._db = db
        self._clock = clock

    async def add(
        self, channel: str, chat_key: str, turn_id: str, position: int, message_id: str
    ) -> None:
        """Record one draft message; on disk before this returns."""
        now = self._clock()
        await self._db.run(
            lambda conn: conn.execute(
                "INSERT INTO stream_drafts (channel, chat_key, turn_id, position, message_id,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (channel, chat_key, turn_id, position)"
                " DO UPDATE SET message_id = excluded.message_id",
                (channel, chat_key, turn_id, position, message_id, now),
            )
        )

    async def of(self, channel: str, chat_key: str, turn_id: str) -> list[str]:
        """The draft's message ids, first message first."""

        def load(conn: Connection) -> list[str]:
            rows = conn.execute(
                "SELECT message_id FROM stream_drafts WHERE channel = ? AND chat_key = ?"
                " AND turn_id = ? ORDER BY position",
                (channel, chat_key, turn_id),
            )
            return [str(row[0]) for row in rows]

        return await self._db.run(load, durable=False)

    async def forget(self, channel: str, chat_key: str, turn_id: str) -> None:
        await self._db.run(lambda conn: conn.execute(FORGET_SQL, (channel, chat_key, turn_id)))

    async def prune(self, before: float) -> int:
        """Forget drafts older than ``before`` whose turn is over (a draft the answer never
        finished: its message failed); an open turn keeps its drafts however old."""

        def delete(conn: Connection) -> int:
            return conn.execute(
                "DELETE FROM stream_drafts WHERE created_at < ? AND turn_id NOT IN"
                " (SELECT id FROM turns WHERE state IN ('running', 'answered'))",
                (before,),
            ).rowcount

        return await self._db.run(delete)
