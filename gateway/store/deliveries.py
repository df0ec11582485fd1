"""When a person last wrote, and what the platform reported about the messages we sent.

WhatsApp only lets a business write freely within 24 hours of the person's last message
(the customer-service window), and tells what became of a sent message later, by webhook
(sent, delivered, read, or failed with a reason). Both live here, in the shared database,
because in a cluster any node may receive the webhook while the leader sends.

``last_inbound_at`` is recorded for every message a person sends, whether the access gate
lets it through or not (a pairing code is an answer too). A status never moves backwards:
a late "delivered" does not overwrite "read", and "failed" stays.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from gateway.store.engine.db import Database
from gateway.store.engine.sql import Connection

Clock = Callable[[], float]
DeliveryState = Literal["sent", "delivered", "read", "failed"]
_RANK = {"sent": 1, "delivered": 2, "read": 3, "failed": 4}
DELIVERY_STATES: dict[str, DeliveryState] = {
    "sent": "sent",
    "delivered": "delivered",
    "read": "read",
    "failed": "failed",
}


@dataclass(frozen=True, slots=True)
class DeliveryStatus:
    channel: str
    message_id: str
    chat_id: str
    status: DeliveryState
    error: str | None
    updated_at: float


class Deliveries:
    def __init__(self, db: Database, *, clock: Clock = time.time) -> None:
        self._db = db
        self._clock = clock

    async def heard_from(self, channel: str, chat_id: str, at: float | None = None) -> None:
        """The person of ``chat_id`` wrote at ``at`` (now when not given)."""
        when = self._clock() if at is None else at
        greatest = self._db.dialect.greatest
        await self._db.run(
            lambda conn: conn.execute(
                "INSERT INTO chat_contacts (channel, chat_id, last_inbound_at) VALUES (?, ?, ?)"
                " ON CONFLICT (channel, chat_id) DO UPDATE SET last_inbound_at ="
                f" {greatest}(chat_contacts.last_inbound_at, excluded.last_inbound_at)",
                (channel, chat_id, when),
            )
        )

    async def last_heard(self, channel: str, chat_id: str) -> float | None:
        def query(conn: Connection) -> float | None:
            row = conn.execute(
                "SELECT last_inbound_at FROM chat_contacts WHERE channel = ? AND chat_id = ?",
                (channel, chat_id),
            ).fetchone()
            return None if row is None else float(row[0])

        return await self._db.run(query, durable=False)

    async def record(
        self,
        channel: str,
        message_id: str,
        chat_id: str,
        status: DeliveryState,
        error: str | None = None,
        *,
        tag: str | None = None,
    ) -> bool:
        """Store a platform's report; returns whether it changed what was known (a repeated
        or older report does not). ``tag`` names the outbox part the message was (kept from
        whichever report carries it first)."""
        now = self._clock()
        rank = _RANK[status]

        def upsert(conn: Connection) -> bool:
            if tag is not None:
                conn.execute(
                    "UPDATE delivery_status SET tag = ? WHERE channel = ? AND message_id = ?"
                    " AND tag IS NULL",
                    (tag, channel, message_id),
                )
            row = conn.execute(
                "SELECT status FROM delivery_status WHERE channel = ? AND message_id = ?",
                (channel, message_id),
            ).fetchone()
            if row is not None and _RANK.get(str(row[0]), 0) >= rank:
                return False
            conn.execute(
                "INSERT INTO delivery_status (channel, message_id, chat_id, status, error,"
                " updated_at, tag) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (channel, message_id)"
                " DO UPDATE SET status = excluded.status, error = excluded.error,"
                " updated_at = excluded.updated_at,"
                " tag = COALESCE(delivery_status.tag, excluded.tag)",
                (channel, message_id, chat_id, status, error, now, tag),
            )
            return True

        return await self._db.run(upsert)

    async def tagged(self, channel: str, tags: Sequence[str]) -> dict[str, str]:
        """The message reported for each of ``tags`` that has a report (tag -> id)."""
        wanted = list(dict.fromkeys(tags))
        if not wanted:
            return {}

        def query(conn: Connection) -> dict[str, str]:
            marks = ", ".join("?" for _ in wanted)
            rows = conn.execute(
                "SELECT tag, message_id FROM delivery_status WHERE channel = ?"
                f" AND tag IN ({marks})",  # placeholders only
                (channel, *wanted),
            )
            return {str(tag): str(message_id) for tag, message_id in rows}

        return await self._db.run(query, durable=False)

    async def status_of(self, channel: str, message_id: str) -> DeliveryStatus | None:
        def query(conn: Connection) -> DeliveryStatus | None:
            row = conn.execute(
                "SELECT chat_id, status, error, updated_at FROM delivery_status"
                " WHERE channel = ? AND message_id = ?",
                (channel, message_id),
            ).fetchone()
            if row is None:
                return None
            chat_id, status, error, updated_at = row
            return DeliveryStatus(channel, message_id, chat_id, status, error, float(updated_at))

        return await self._db.run(query, durable=False)

    async def counts(self, channel: str) -> dict[str, int]:
        """How many of the channel's messages are in each state."""

        def query(conn: Connection) -> dict[str, int]:
            rows = conn.execute(
                "SELECT status, COUNT(*) FROM delivery_status WHERE channel = ? GROUP BY status",
                (channel,),
            )
            return {str(status): int(count) for status, count in rows}

        return await self._db.run(query, durable=False)

    async def prune(self, before: float) -> int:
        """Forget reports older than ``before`` (windows older than a day are closed anyway,
        but they stay: a person's last message is what decides)."""
        return await self._db.run(
            lambda conn: (
                conn.execute("DELETE FROM delivery_status WHERE updated_at < ?", (before,)).rowcount
            )
        )
