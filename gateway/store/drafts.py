"""The platform messages an answer streamed by editing occupies, until the answer is final.

A channel that streams by editing posts a draft message as soon as the model writes, and
more when the answer outgrows one message. Each post is recorded *before* it is made
(:meth:`Drafts.posting`, no id yet, with what the channel noted to find it again) and its
platform id the moment the platform returns it (:meth:`Drafts.posted`). So after a crash the
outbox's final message is delivered by editing those messages (and deleting any left over)
rather than as a second copy, and a post whose id was never recorded is known to be somewhere
in the chat: the delivery finds it the platform's way (gateway/core/channel.py:
``SupportsResend``). The rows go in the transaction that marks the final message sent
(:meth:`Outbox.mark_sent`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway.core.channel import SendAttempt
from gateway.core.errors import StoreError
from gateway.store.db import Database
from gateway.store.sql import Connection

Clock = Callable[[], float]


class TurnOver(StoreError):
    """A draft post for a turn that is no longer running."""


FORGET_SQL = "DELETE FROM stream_drafts WHERE channel = ? AND chat_key = ? AND turn_id = ?"


@dataclass(frozen=True, slots=True)
class DraftMessages:
    """A turn's draft in one chat: the ids recorded, in order, and the posts made without
    their id ever being recorded (the process died, or the platform's answer was lost)."""

    ids: tuple[str, ...] = ()
    lost: tuple[SendAttempt, ...] = ()


class Drafts:
    def __init__(self, db: Database, *, clock: Clock = time.time) -> None:
        self._db = db
        self._clock = clock

    async def posting(self, channel: str, chat_key: str, turn_id: str, mark: str | None) -> int:
        """Record that a draft message is about to be posted (on disk before this
        returns); returns its slot, for :meth:`posted`. Refused (:class:`TurnOver`) once the
        turn is no longer running: its answer may be on its way."""
        now = self._clock()

        def insert(conn: Connection) -> int:
            row = conn.execute(
                "INSERT INTO stream_drafts (channel, chat_key, turn_id, position, mark,"
                " created_at) SELECT ?, ?, ?, (SELECT COALESCE(MAX(position) + 1, 0) FROM"
                " stream_drafts WHERE channel = ? AND chat_key = ? AND turn_id = ?), ?, ?"
                " WHERE EXISTS (SELECT 1 FROM turns WHERE id = ? AND state = 'running')"
                " RETURNING position",
                (channel, chat_key, turn_id, channel, chat_key, turn_id, mark, now, turn_id),
            ).fetchone()
            if row is None:
                raise TurnOver(f"turn {turn_id} is over: no more draft messages for it")
            return int(row[0])

        return await self._db.run(insert, urgent=True)

    async def posted(
        self, channel: str, chat_key: str, turn_id: str, position: int, message_id: str
    ) -> None:
        """Record the platform id of the draft message posted in ``position``."""
        await self._db.run(
            lambda conn: conn.execute(
                "UPDATE stream_drafts SET message_id = ? WHERE channel = ? AND chat_key = ?"
                " AND turn_id = ? AND position = ?",
                (message_id, channel, chat_key, turn_id, position),
            ),
            urgent=True,
        )

    async def not_posted(self, channel: str, chat_key: str, turn_id: str, position: int) -> None:
        """The platform refused the post: nothing is out there to find."""
        await self._db.run(
            lambda conn: conn.execute(
                "DELETE FROM stream_drafts WHERE channel = ? AND chat_key = ? AND turn_id = ?"
                " AND position = ? AND message_id IS NULL",
                (channel, chat_key, turn_id, position),
            )
        )

    async def of(self, channel: str, chat_key: str, turn_id: str) -> DraftMessages:
        """The draft's message ids, first message first, and its posts of unknown fate."""

        def load(conn: Connection) -> DraftMessages:
            rows = conn.execute(
                "SELECT message_id, mark, created_at FROM stream_drafts WHERE channel = ?"
                " AND chat_key = ? AND turn_id = ? ORDER BY position",
                (channel, chat_key, turn_id),
            ).fetchall()
            return DraftMessages(
                tuple(str(message_id) for message_id, _, _ in rows if message_id is not None),
                tuple(
                    SendAttempt(float(at), mark, draft=True)
                    for message_id, mark, at in rows
                    if message_id is None
                ),
            )

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
