"""Group messages the bot was not addressed in, kept until a message addresses it there.

The access gate writes an unmentioned message of an allowed sender here (durably, before the
platform is acknowledged) instead of dropping it; the next message that addresses the bot in
that group takes the newest of them along as context and removes them (``take``). Each row is
stored once per platform id, so a redelivered message is not doubled. Nothing here is ever a
turn or anyone's memory.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway.store.engine.db import Database
from gateway.store.engine.sql import Connection

Clock = Callable[[], float]
KEEP_PER_CHAT = 200  # beyond this, the oldest of a group's kept messages go


@dataclass(frozen=True, slots=True)
class HeardMessage:
    id: int
    author: str
    text: str
    at: float


class GroupContext:
    def __init__(self, db: Database, *, clock: Clock = time.time) -> None:
        self._db = db
        self._clock = clock

    async def keep(
        self, *, channel: str, chat_key: str, platform_id: str, author: str, text: str, at: float
    ) -> None:
        """Store one unaddressed message (once per platform id); old ones beyond
        :data:`KEEP_PER_CHAT` for the chat are dropped."""

        def insert(conn: Connection) -> None:
            conn.execute(
                "INSERT INTO group_context (channel, chat_key, platform_id, author, text, at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (channel, platform_id) DO NOTHING",
                (channel, chat_key, platform_id, author, text, at),
            )
            conn.execute(
                "DELETE FROM group_context WHERE chat_key = ? AND id <= ("
                " SELECT id FROM group_context WHERE chat_key = ?"
                " ORDER BY id DESC LIMIT 1 OFFSET ?)",
                (chat_key, chat_key, KEEP_PER_CHAT),
            )

        await self._db.run(insert)

    async def recent(self, chat_key: str, limit: int) -> list[HeardMessage]:
        """The newest ``limit`` kept messages of a chat, oldest first."""

        def query(conn: Connection) -> list[HeardMessage]:
            rows = conn.execute(
                "SELECT id, author, text, at FROM group_context WHERE chat_key = ?"
                " ORDER BY id DESC LIMIT ?",
                (chat_key, limit),
            ).fetchall()
            return [HeardMessage(int(i), a, t, float(w)) for i, a, t, w in reversed(rows)]

        return await self._db.run(query, durable=False)

    async def forget(self, chat_key: str, up_to: int) -> None:
        """Remove a chat's kept messages up to id ``up_to`` (they went with a message)."""
        await self._db.run(
            lambda conn: conn.execute(
                "DELETE FROM group_context WHERE chat_key = ? AND id <= ?", (chat_key, up_to)
            )
        )

    async def prune(self, before: float) -> int:
        """Forget kept messages written before ``before`` (a group nobody addressed for
        longer than the journal's window): stale context is no context."""

        def delete(conn: Connection) -> int:
            return int(conn.execute("DELETE FROM group_context WHERE at < ?", (before,)).rowcount)

        return await self._db.run(delete)
