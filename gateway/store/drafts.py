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

In a cluster, the node that claims a session retires the drafts its running turns posted
under the earlier claim (:func:`retire_statement`, in the claim's transaction). The node that
posted them may live on without knowing it lost the session (its membership connection was
ended by the server) and edit them until it notices, outside the database, so no fence
stops it: an edit on its way when the answer is delivered would overwrite the answer with
its partial text. So a retired draft is never finished into the answer; the answer is
posted apart and the retired messages are deleted, and a late edit finds nothing to change.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway.core.channel import SendAttempt
from gateway.core.errors import StoreError
from gateway.store.engine.db import Database
from gateway.store.engine.sql import Connection, Cursor

Clock = Callable[[], float]


class TurnOver(StoreError):
    """A draft post for a turn that is no longer running."""


FORGET_SQL = "DELETE FROM stream_drafts WHERE channel = ? AND chat_key = ? AND turn_id = ?"


@dataclass(frozen=True, slots=True)
class DraftMessages:
    """A turn's draft in one chat: the ids recorded, in order, and the posts made without
    their id ever being recorded (the process died, or the platform's answer was lost);
    ``retired``: the ids of draft messages posted under an earlier claim of the session
    (a cluster), which a node that lost the session may still be editing: deleted, never
    finished into the answer."""

    ids: tuple[str, ...] = ()
    lost: tuple[SendAttempt, ...] = ()
    retired: tuple[str, ...] = ()


def retire_statement(conn: Connection, session_key: str) -> None:
    """Retire the draft messages of the running turns of ``session_key``: run in the
    transaction that claims the session for another node (gateway/store/cluster/fencing.py), after
    the claim, so every post the earlier claim recorded is among them. A post whose id was
    not recorded yet stays as it is: its node can no longer record the id (the fence
    refuses it), so it never edits that message again, and the answer may be delivered
    into it once found."""
    conn.execute(
        "UPDATE stream_drafts SET retired = 1 WHERE retired = 0 AND message_id IS NOT NULL"
        " AND turn_id IN (SELECT id FROM turns WHERE session_key = ? AND state = 'running')",
        (session_key,),
    )


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
        """The draft's message ids, first message first, its posts of unknown fate, and
        its retired messages."""

        def parse(cursors: list[Cursor]) -> DraftMessages:
            rows = cursors[0].fetchall()
            recorded = [
                (str(message_id), bool(retired))
                for message_id, _, _, retired in rows
                if message_id is not None
            ]
            return DraftMessages(
                tuple(message_id for message_id, retired in recorded if not retired),
                tuple(
                    SendAttempt(float(at), mark, draft=True)
                    for message_id, mark, at, _ in rows
                    if message_id is None
                ),
                tuple(message_id for message_id, retired in recorded if retired),
            )

        recorded = (
            "SELECT message_id, mark, created_at, retired FROM stream_drafts WHERE"
            " channel = ? AND chat_key = ? AND turn_id = ? ORDER BY position",
            (channel, chat_key, turn_id),
        )
        return await self._db.select([recorded], parse)

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
