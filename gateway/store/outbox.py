"""Durable outbound queue: what must reach a chat, with retries and backoff.

Rows are keyed by the message's idempotency key, so queueing the same answer twice (a
resumed turn, a repeated tool call) stores it once. Order is kept per chat: a chat's next
message waits until the one before it is sent or given up.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass

from gateway.core.messages import OutboundMessage
from gateway.store.db import Database
from gateway.store.drafts import FORGET_SQL
from gateway.store.retention import delete_batched
from gateway.store.sql import OUTBOX_TOPIC, Connection, notify

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class OutboxRecord:
    id: int
    message: OutboundMessage
    attempts: int
    due_at: float


class Outbox:
    def __init__(self, db: Database, *, clock: Clock = time.time) -> None:
        self._db = db
        self._clock = clock

    def enqueue_statement(self, conn: Connection, messages: Sequence[OutboundMessage]) -> int:
        now = self._clock()
        inserted = 0
        for msg in messages:
            cursor = conn.execute(
                "INSERT INTO outbox (idem_key, channel, chat_key, payload, next_attempt_at,"
                " turn_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (idem_key) DO NOTHING",
                (
                    msg.idempotency_key,
                    msg.channel,
                    msg.chat.session_key,
                    json.dumps(msg.to_dict(), ensure_ascii=False),
                    now,
                    msg.turn_id,
                    now,
                ),
            )
            inserted += cursor.rowcount
        if inserted:  # a cluster's leader sends: wake its worker on commit
            for channel in sorted({msg.channel for msg in messages}):
                notify(conn, OUTBOX_TOPIC, channel)
        return inserted

    async def enqueue(self, messages: Sequence[OutboundMessage]) -> int:
        """Store messages for delivery; returns how many were new."""
        return await self._db.run(lambda conn: self.enqueue_statement(conn, messages))

    async def heads(
        self, channel: str, *, limit: int = 200, skip: Container[str] = ()
    ) -> list[OutboxRecord]:
        """The oldest pending message of each chat of ``channel``, due or not, except for
        the chats (session keys) in ``skip`` (those being sent: not decoded again)."""

        def load(conn: Connection) -> list[OutboxRecord]:
            rows = conn.execute(
                "SELECT o.id, o.chat_key, o.payload, o.attempts, o.next_attempt_at FROM outbox o"
                " JOIN (SELECT MIN(id) AS id FROM outbox"
                "       WHERE state = 'pending' AND channel = ? GROUP BY chat_key) head"
                "   ON head.id = o.id"
                " ORDER BY o.id LIMIT ?",
                (channel, limit),
            )
            return [
                OutboxRecord(
                    row_id, OutboundMessage.from_dict(json.loads(payload)), attempts, due_at
                )
                for row_id, chat_key, payload, attempts, due_at in rows
                if chat_key not in skip
            ]

        return await self._db.run(load, durable=False)  # a read: never needs an fsync

    async def mark_sent(
        self, record_id: int, receipt: str | None = None, *, finished_draft: str | None = None
    ) -> bool:
        """Record the delivery; returns whether the same chat has another message waiting
        (so the sender knows whether to look again). ``finished_draft``: the message was
        delivered by editing that turn's streamed draft, which is forgotten in the same
        transaction."""
        now = self._clock()

        def update(conn: Connection) -> bool:
            conn.execute(
                "UPDATE outbox SET state = 'sent', sent_at = ?, receipt = ?,"
                " attempts = attempts + 1 WHERE id = ?",
                (now, receipt, record_id),
            )
            if finished_draft is not None:
                row = conn.execute(
                    "SELECT channel, chat_key FROM outbox WHERE id = ?", (record_id,)
                ).fetchone()
                if row is not None:
                    conn.execute(FORGET_SQL, (row[0], row[1], finished_draft))
            row = conn.execute(
                "SELECT 1 FROM outbox o JOIN outbox sent ON sent.id = ?"
                " WHERE o.state = 'pending' AND o.channel = sent.channel"
                " AND o.chat_key = sent.chat_key LIMIT 1",
                (record_id,),
            ).fetchone()
            return row is not None

        return await self._db.run(update)

    async def reschedule(self, record_id: int, delay: float, error: str) -> None:
        due_at = self._clock() + delay
        await self._db.run(
            lambda conn: conn.execute(
                "UPDATE outbox SET attempts = attempts + 1, next_attempt_at = ?, last_error = ?"
                " WHERE id = ?",
                (due_at, error[:500], record_id),
            )
        )

    async def hold_chat(self, channel: str, chat_key: str, until: float) -> None:
        """Delay every pending message of one chat (the platform rate-limited it)."""
        greatest = self._db.dialect.greatest
        await self._db.run(
            lambda conn: conn.execute(
                f"UPDATE outbox SET next_attempt_at = {greatest}(next_attempt_at, ?)"
                " WHERE state = 'pending' AND channel = ? AND chat_key = ?",
                (until, channel, chat_key),
            )
        )

    async def chat_held(self, channel: str, chat_key: str, now: float) -> bool:
        """Whether the platform asked us to wait before sending more to this chat."""

        def query(conn: Connection) -> bool:
            row = conn.execute(
                "SELECT 1 FROM outbox WHERE state = 'pending' AND channel = ? AND chat_key = ?"
                " AND next_attempt_at > ? LIMIT 1",
                (channel, chat_key, now),
            ).fetchone()
            return row is not None

        return await self._db.run(query)

    async def mark_failed(self, record_id: int, error: str) -> None:
        await self._db.run(
            lambda conn: conn.execute(
                "UPDATE outbox SET state = 'failed', attempts = attempts + 1, last_error = ?"
                " WHERE id = ?",
                (error[:500], record_id),
            )
        )

    async def pending_count(self, channel: str | None = None) -> int:
        def load(conn: Connection) -> int:
            if channel is None:
                row = conn.execute("SELECT COUNT(*) FROM outbox WHERE state = 'pending'").fetchone()
            else:
                row = conn.execute(
                    "SELECT COUNT(*) FROM outbox WHERE state = 'pending' AND channel = ?",
                    (channel,),
                ).fetchone()
            return int(row[0])

        return await self._db.run(load)

    async def failed_count(self) -> int:
        def load(conn: Connection) -> int:
            return int(
                conn.execute("SELECT COUNT(*) FROM outbox WHERE state = 'failed'").fetchone()[0]
            )

        return await self._db.run(load)

    async def prune(self, before: float) -> int:
        """Forget messages sent or given up before ``before``; pending ones always stay."""
        return await delete_batched(
            self._db,
            "outbox",
            "state IN ('sent', 'failed') AND COALESCE(sent_at, created_at) < ?",
            [before],
        )
