"""Durable outbound queue: what must reach a chat, with retries, backoff and no doubles.

Rows are keyed by the message's idempotency key, so queueing the same answer twice (a
resumed turn, a repeated tool call) stores it once. Order is kept per chat: a chat's next
message waits until the one before it is sent or given up.

A row's states (:class:`OutboxState`)::

    pending --mark_sending--> sending --mark_sent--> sent
                                 |  \\--mark_failed--> failed
                                 \\--retry_later--> sending (due later)

A send and the record of its result cannot be one transaction, so the row is marked
``sending`` (with the attempt, :class:`SendAttempt`, in ``open_sends``) durably *before* the
platform call, and its result is recorded the moment the call returns. A row found
``sending`` with nobody sending it (after a crash, on a new cluster leader), or one whose
attempt failed, is *lost*: its next attempt is a resend, in which the channel first finds
out what the earlier attempts left (:class:`gateway.core.channel.SupportsResend`). A row
never goes back to ``pending``: a failure can come after part of a message went out.
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.core.channel import KnownMessage, SendAttempt
from gateway.core.messages import ChatRef, OutboundMessage
from gateway.store.drafts import FORGET_SQL
from gateway.store.engine.db import Database
from gateway.store.engine.retention import delete_batched
from gateway.store.engine.sql import OUTBOX_TOPIC, Connection, Cursor, Statement

Clock = Callable[[], float]
# May this process send now? A condition (SQL and its values) the statement that finds a
# row to mark ``sending`` adds to its own, asked for at each send. (A cluster node's: it
# still leads; see gateway/store/cluster/membership.py.)
Fence = Callable[[], Statement]
MAX_OPEN_SENDS = 16  # attempts kept per row: the first and the latest ones
SENT_LOOKUP = 1_000  # a chat's newest deliveries a reply's target is looked for among


class OutboxState(enum.StrEnum):
    PENDING = "pending"  # not tried yet
    SENDING = "sending"  # tried; the outcome of an attempt is not recorded (yet)
    SENT = "sent"
    FAILED = "failed"  # given up (a permanent error, or too many attempts)


UNSENT = (OutboxState.PENDING.value, OutboxState.SENDING.value)
# in the statements' text, not their values: the planner matches it to the partial index
# of unsent rows (``outbox_due``) only when it sees the states (a prepared statement's
# values it does not see)
UNSENT_SQL = "(" + ", ".join(f"'{state}'" for state in UNSENT) + ")"


@dataclass(frozen=True, slots=True)
class OutboxRecord:
    id: int
    message: OutboundMessage
    attempts: int
    due_at: float
    state: OutboxState = OutboxState.PENDING
    open_sends: tuple[SendAttempt, ...] = ()  # attempts whose outcome is not recorded

    @property
    def lost(self) -> bool:
        """An earlier attempt may have delivered some or all of it: resend, don't send."""
        return self.state is OutboxState.SENDING


@dataclass(frozen=True, slots=True)
class SentMessage:
    """One of the bot's delivered messages, as a reply to it finds it again."""

    text: str
    sent_at: float


@dataclass(frozen=True, slots=True)
class UnsentMessage:
    """An unsent row as ``/status`` explains it: where to, and why it is not out yet."""

    channel: str
    state: OutboxState
    attempts: int
    due_at: float
    created_at: float
    last_error: str | None
    behind: bool  # an earlier message to the same chat is unsent too (chats keep order)


def _attempts(raw: str | None) -> tuple[SendAttempt, ...]:
    if not raw:
        return ()
    items: list[dict[str, Any]] = json.loads(raw)
    return tuple(SendAttempt.from_dict(item) for item in items)


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
                conn.notify(OUTBOX_TOPIC, channel)
        return inserted

    async def enqueue(self, messages: Sequence[OutboundMessage]) -> int:
        """Store messages for delivery; returns how many were new."""
        return await self._db.run(lambda conn: self.enqueue_statement(conn, messages))

    async def heads(
        self, channel: str, *, limit: int = 200, skip: Container[str] = ()
    ) -> list[OutboxRecord]:
        """The oldest unsent message of each chat of ``channel``, due or not, except for
        the chats (session keys) in ``skip`` (those being sent: not decoded again)."""

        oldest = (
            "SELECT o.id, o.chat_key, o.payload, o.attempts, o.next_attempt_at, o.state,"
            " o.open_sends FROM outbox o"
            " JOIN (SELECT MIN(id) AS id FROM outbox"
            f"       WHERE state IN {UNSENT_SQL} AND channel = ? GROUP BY chat_key) head"
            "   ON head.id = o.id"
            " ORDER BY o.id LIMIT ?",
            (channel, limit),
        )

        def parse(cursors: list[Cursor]) -> list[OutboxRecord]:
            (rows,) = cursors
            return [
                OutboxRecord(
                    row_id,
                    OutboundMessage.from_dict(json.loads(payload)),
                    attempts,
                    due_at,
                    OutboxState(state),
                    _attempts(open_sends),
                )
                for row_id, chat_key, payload, attempts, due_at, state, open_sends in rows
                if chat_key not in skip
            ]

        return await self._db.select([oldest], parse)

    async def mark_sending(
        self, record_id: int, attempt: SendAttempt, *, fence: Fence | None = None
    ) -> OutboxRecord | None:
        """Record that ``attempt`` is about to be made, on disk before this returns.

        Returns the row as it is now (its open attempts include this one), or ``None`` when
        it must not be sent: the row is no longer unsent, or ``fence`` says this process may
        not send (a cluster node that no longer leads)."""

        condition, values = fence() if fence is not None else ("1 = 1", ())

        def mark(conn: Connection) -> OutboxRecord | None:
            row = conn.execute(
                "SELECT payload, attempts, next_attempt_at, open_sends FROM outbox"
                f" WHERE id = ? AND state IN {UNSENT_SQL} AND {condition}",
                (record_id, *values),
            ).fetchone()
            if row is None:
                return None
            payload, attempts, due_at, raw = row
            known = list(_attempts(raw))
            if len(known) >= MAX_OPEN_SENDS:  # the first one has the earliest window
                known = [known[0], *known[-(MAX_OPEN_SENDS - 2) :]]
            sends = (*known, attempt)
            conn.execute(
                "UPDATE outbox SET state = ?, open_sends = ? WHERE id = ?",
                (
                    OutboxState.SENDING.value,
                    json.dumps([a.to_dict() for a in sends]),
                    record_id,
                ),
            )
            message = OutboundMessage.from_dict(json.loads(payload))
            return OutboxRecord(record_id, message, attempts, due_at, OutboxState.SENDING, sends)

        return await self._db.run(mark, urgent=True)

    async def mark_sent(
        self, record_id: int, receipt: str | None = None, *, finished_draft: str | None = None
    ) -> bool:
        """Record the delivery (ahead of other writes waiting for the store); returns
        whether the same chat has another message waiting (so the sender knows whether to
        look again). ``finished_draft``: the message was delivered into that turn's streamed
        draft, which is forgotten in the same transaction."""
        now = self._clock()

        def update(conn: Connection) -> bool:
            conn.execute(
                "UPDATE outbox SET state = ?, sent_at = ?, receipt = ?, open_sends = NULL,"
                " attempts = attempts + 1 WHERE id = ?",
                (OutboxState.SENT.value, now, receipt, record_id),
            )
            if finished_draft is not None:
                row = conn.execute(
                    "SELECT channel, chat_key FROM outbox WHERE id = ?", (record_id,)
                ).fetchone()
                if row is not None:
                    conn.execute(FORGET_SQL, (row[0], row[1], finished_draft))
            row = conn.execute(
                "SELECT 1 FROM outbox o JOIN outbox sent ON sent.id = ?"
                f" WHERE o.state IN {UNSENT_SQL} AND o.channel = sent.channel"
                " AND o.chat_key = sent.chat_key AND o.id <> sent.id LIMIT 1",
                (record_id,),
            ).fetchone()
            return row is not None

        return await self._db.run(update, urgent=True)

    async def retry_later(self, record_id: int, delay: float, error: str) -> None:
        """The attempt failed; try again in ``delay`` seconds (as a resend: the row stays
        ``sending`` with its open attempts, since part of it may have gone out)."""
        due_at = self._clock() + delay
        await self._db.run(
            lambda conn: conn.execute(
                "UPDATE outbox SET attempts = attempts + 1, next_attempt_at = ?, last_error = ?"
                " WHERE id = ?",
                (due_at, error[:500], record_id),
            )
        )

    async def hold_chat(self, channel: str, chat_key: str, until: float) -> None:
        """Delay every unsent message of one chat (the platform rate-limited it)."""
        greatest = self._db.dialect.greatest
        await self._db.run(
            lambda conn: conn.execute(
                f"UPDATE outbox SET next_attempt_at = {greatest}(next_attempt_at, ?)"
                f" WHERE state IN {UNSENT_SQL} AND channel = ? AND chat_key = ?",
                (until, channel, chat_key),
            )
        )

    async def chat_held(self, channel: str, chat_key: str, now: float) -> bool:
        """Whether the platform asked us to wait before sending more to this chat."""

        def query(conn: Connection) -> bool:
            row = conn.execute(
                f"SELECT 1 FROM outbox WHERE state IN {UNSENT_SQL} AND channel = ?"
                " AND chat_key = ? AND next_attempt_at > ? LIMIT 1",
                (channel, chat_key, now),
            ).fetchone()
            return row is not None

        return await self._db.run(query, durable=False)

    async def mark_failed(self, record_id: int, error: str) -> None:
        await self._db.run(
            lambda conn: conn.execute(
                "UPDATE outbox SET state = ?, attempts = attempts + 1, last_error = ?,"
                " open_sends = NULL WHERE id = ?",
                (OutboxState.FAILED.value, error[:500], record_id),
            ),
            urgent=True,
        )

    async def known(self, channel: str, *, since: float, turn_id: str | None) -> list[KnownMessage]:
        """The messages of ``channel`` the store recorded from ``since`` on (delivered
        messages, streamed drafts of other turns and the retired drafts of this one,
        messages people sent), and the messages turn ``turn_id`` answers (``answered``):
        none of them is what a lost send of that turn left."""

        def load(conn: Connection) -> list[KnownMessage]:
            found: list[KnownMessage] = []
            rows = conn.execute(
                "SELECT payload, receipt, sent_at FROM outbox WHERE channel = ? AND state = ?"
                " AND sent_at >= ? AND receipt IS NOT NULL",
                (channel, OutboxState.SENT.value, since),
            )
            for payload, receipt, sent_at in rows:
                chat_id = str(json.loads(payload)["chat_id"])
                found.extend(
                    KnownMessage(chat_id, part, float(sent_at))
                    for part in str(receipt).split(",")
                    if part
                )
            rows = conn.execute(
                "SELECT chat_key, message_id, created_at FROM stream_drafts WHERE channel = ?"
                " AND created_at >= ? AND message_id IS NOT NULL AND (turn_id <> ? OR retired = 1)",
                (channel, since, turn_id or ""),
            )
            found.extend(
                KnownMessage(chat_of(chat_key), str(message_id), float(created_at))
                for chat_key, message_id, created_at in rows
            )
            rows = conn.execute(
                "SELECT session_key, platform_id, created_at, turn_id FROM inbound"
                " WHERE channel = ? AND (created_at >= ? OR turn_id = ?)",
                (channel, since, turn_id or ""),
            )
            found.extend(
                KnownMessage(
                    chat_of(chat_key),
                    str(platform_id),
                    float(created_at),
                    answered=turn_id is not None and answers == turn_id,
                )
                for chat_key, platform_id, created_at, answers in rows
            )
            return found

        return await self._db.run(load, durable=False)

    async def of_turn(self, channel: str, chat_key: str, turn_id: str) -> list[OutboundMessage]:
        """What turn ``turn_id`` queued for the chat ``chat_key`` of ``channel`` (sent or
        not), in the order it queued them."""

        def load(conn: Connection) -> list[OutboundMessage]:
            rows = conn.execute(
                "SELECT payload FROM outbox WHERE chat_key = ? AND channel = ? AND turn_id = ?"
                " ORDER BY id",
                (chat_key, channel, turn_id),
            )
            return [OutboundMessage.from_dict(json.loads(payload)) for (payload,) in rows]

        return await self._db.run(load, durable=False)

    async def sent_as(self, chat_key: str, platform_id: str) -> SentMessage | None:
        """The message delivered to chat ``chat_key`` (``channel:chat[:thread]``) that the
        platform calls ``platform_id`` (one of its parts, for a message sent in parts),
        among the chat's newest :data:`SENT_LOOKUP` deliveries still kept."""

        def parse(cursors: list[Cursor]) -> SentMessage | None:
            for payload, receipt, sent_at in cursors[0]:
                if platform_id in str(receipt).split(","):
                    message = OutboundMessage.from_dict(json.loads(payload))
                    return SentMessage(message.text, float(sent_at))
            return None

        return await self._db.select(
            [
                (
                    "SELECT payload, receipt, sent_at FROM outbox WHERE chat_key = ?"
                    " AND state = ? AND receipt IS NOT NULL ORDER BY id DESC LIMIT ?",
                    (chat_key, OutboxState.SENT.value, SENT_LOOKUP),
                )
            ],
            parse,
        )

    async def last_chat(self, chat_key: str) -> ChatRef | None:
        """The chat of the newest message kept for ``chat_key`` (``channel:chat[:thread]``):
        the key's chat id and thread told apart as they were sent (a chat id may hold a
        ``:``); ``None`` when none is kept."""

        def parse(cursors: list[Cursor]) -> ChatRef | None:
            row = cursors[0].fetchone()
            return None if row is None else OutboundMessage.from_dict(json.loads(row[0])).chat

        return await self._db.select(
            [
                (
                    "SELECT payload FROM outbox WHERE chat_key = ? ORDER BY id DESC LIMIT 1",
                    (chat_key,),
                )
            ],
            parse,
        )

    async def pending_count(self, channel: str | None = None) -> int:
        """Messages not delivered yet (waiting, or being sent)."""

        def load(conn: Connection) -> int:
            if channel is None:
                row = conn.execute(
                    f"SELECT COUNT(*) FROM outbox WHERE state IN {UNSENT_SQL}"
                ).fetchone()
            else:
                row = conn.execute(
                    f"SELECT COUNT(*) FROM outbox WHERE state IN {UNSENT_SQL} AND channel = ?",
                    (channel,),
                ).fetchone()
            return int(row[0])

        return await self._db.run(load, durable=False)

    async def unsent(self, limit: int = 100) -> list[UnsentMessage]:
        """The oldest unsent messages, each with what keeps it (``/status``)."""
        statement = (
            "SELECT o.channel, o.state, o.attempts, o.next_attempt_at, o.created_at,"
            " o.last_error, EXISTS (SELECT 1 FROM outbox e"
            f"  WHERE e.state IN {UNSENT_SQL} AND e.channel = o.channel"
            "   AND e.chat_key = o.chat_key AND e.id < o.id)"
            f" FROM outbox o WHERE o.state IN {UNSENT_SQL} ORDER BY o.id LIMIT ?",
            (limit,),
        )

        def parse(cursors: list[Cursor]) -> list[UnsentMessage]:
            (rows,) = cursors
            return [
                UnsentMessage(
                    channel, OutboxState(state), attempts, due_at, created_at, error, bool(behind)
                )
                for channel, state, attempts, due_at, created_at, error, behind in rows
            ]

        return await self._db.select([statement], parse)

    async def failed_count(self) -> int:
        def load(conn: Connection) -> int:
            return int(
                conn.execute("SELECT COUNT(*) FROM outbox WHERE state = 'failed'").fetchone()[0]
            )

        return await self._db.run(load, durable=False)

    async def prune(self, before: float) -> int:
        """Forget messages sent or given up before ``before``; unsent ones always stay."""
        return await delete_batched(
            self._db,
            "outbox",
            "state IN ('sent', 'failed') AND COALESCE(sent_at, created_at) < ?",
            [before],
        )


def chat_of(chat_key: str) -> str:
    """The chat id inside a chat's session key (``channel:chat[:thread]``)."""
    return chat_key.split(":", 2)[1] if chat_key.count(":") else chat_key
