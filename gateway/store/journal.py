"""The inbound journal and the turn table.

An inbound message moves pending → processing → done. It is inserted (deduplicated by
channel + platform message id) before the platform is acknowledged; it is marked done in
the same transaction that stores the turn's answer in the outbox, so after a crash every
message is either answered exactly once or still open and resumed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gateway.core.messages import ChatRef, InboundMessage
from gateway.core.turns import TurnKind
from gateway.store.cluster.fencing import claim_statement, claimed_epoch
from gateway.store.drafts import retire_statement
from gateway.store.engine.db import Database
from gateway.store.engine.retention import delete_batched
from gateway.store.engine.sql import INBOUND_TOPIC, Connection, Statement

Clock = Callable[[], float]


TurnEnd = Literal["done", "failed"]  # how a committed turn ended


@dataclass(frozen=True, slots=True)
class LastTurn:
    state: str  # running | answered | done | failed
    at: float  # when it last changed


@dataclass(frozen=True, slots=True)
class InboundRecord:
    """A journaled inbound message."""

    id: int
    message: InboundMessage
    turn_id: str | None = None

    @property
    def session_key(self) -> str:
        return self.message.session_key


@dataclass(frozen=True, slots=True)
class OpenTurn:
    """A turn that was running when the process stopped."""

    id: str
    session_key: str
    kind: TurnKind
    attempts: int
    records: tuple[InboundRecord, ...]
    stop_requested: bool = False  # someone asked it to stop: close it, never run it on


@dataclass(frozen=True, slots=True)
class OpenWork:
    """What a fresh start must pick up again, oldest first."""

    pending: tuple[InboundRecord, ...]
    running: tuple[OpenTurn, ...]
    epoch: int = 0  # the claim's epoch, when loaded with a claim (a cluster's session)


def _record(row: Sequence[Any]) -> InboundRecord:
    row_id, payload, turn_id = row
    return InboundRecord(row_id, InboundMessage.from_dict(json.loads(payload)), turn_id)


# Background tasks' turns are resumed by the tasks themselves (gateway/runtime/agents/subagents.py),
# never by the dispatcher: they answer no inbound message.
_OPEN_TURNS = f"state = 'running' AND kind != '{TurnKind.SUBAGENT}'"


def _running_statement(where: str, params: Sequence[Any]) -> Statement:
    """The turns left running (``where``: more conditions), for :func:`_open_turns`."""
    return (
        "SELECT id, session_key, kind, attempts, stop_requested_at FROM turns"
        f" WHERE {_OPEN_TURNS}{where} ORDER BY created_at",
        tuple(params),
    )


def _running(conn: Connection, where: str, params: Sequence[Any]) -> tuple[OpenTurn, ...]:
    return _open_turns(conn, conn.execute(*_running_statement(where, params)).fetchall())


def _open_turns(conn: Connection, turns: Sequence[Sequence[Any]]) -> tuple[OpenTurn, ...]:
    """The running turns of ``turns`` (rows of :func:`_running_statement`), each with the
    messages it answers."""
    running: list[OpenTurn] = []
    for turn_id, session_key, kind, attempts, stop_requested_at in turns:
        records = tuple(
            _record(row)
            for row in conn.execute(
                "SELECT id, payload, turn_id FROM inbound WHERE turn_id = ? ORDER BY id",
                (turn_id,),
            )
        )
        stopped = stop_requested_at is not None
        running.append(
            OpenTurn(turn_id, session_key, TurnKind(kind), int(attempts), records, stopped)
        )
    return tuple(running)


class Journal:
    def __init__(self, db: Database, *, clock: Clock = time.time) -> None:
        self._db = db
        self._clock = clock

    async def accept(self, msg: InboundMessage) -> InboundRecord | None:
        """Durably record ``msg``; ``None`` when this platform message was seen before."""
        payload = json.dumps(msg.to_dict(), ensure_ascii=False)
        now = self._clock()

        def insert(conn: Connection) -> int | None:
            cursor = conn.execute(
                "INSERT INTO inbound (channel, platform_id, session_key, payload, created_at,"
                " updated_at) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (channel, platform_id) DO NOTHING RETURNING id",
                (msg.channel, msg.platform_message_id, msg.session_key, payload, now, now),
            )
            row = cursor.fetchone()
            if row is None:
                return None
            conn.notify(INBOUND_TOPIC)  # a cluster's nodes look for work on commit
            return int(row[0])

        row_id = await self._db.run(insert)
        return None if row_id is None else InboundRecord(row_id, msg)

    async def seen(self, channel: str, platform_id: str) -> bool:
        def query(conn: Connection) -> bool:
            row = conn.execute(
                "SELECT 1 FROM inbound WHERE channel = ? AND platform_id = ?",
                (channel, platform_id),
            ).fetchone()
            return row is not None

        return await self._db.run(query, durable=False)

    async def start_turn(
        self, turn_id: str, session_key: str, kind: TurnKind, record_ids: Sequence[int]
    ) -> None:
        """Create the turn and mark its inbound messages as processing (one transaction);
        for a turn that exists already, a no-op.

        Not fsynced on its own (``durable=False``): if a power cut loses it, the messages
        are still pending and are answered by a new turn after the restart."""
        now = self._clock()

        def claim(conn: Connection) -> None:
            conn.execute(
                "INSERT INTO turns (id, session_key, kind, state, created_at, updated_at)"
                " VALUES (?, ?, ?, 'running', ?, ?) ON CONFLICT (id) DO NOTHING",
                (turn_id, session_key, kind, now, now),
            )
            conn.executemany(
                "UPDATE inbound SET state = 'processing', turn_id = ?, updated_at = ? WHERE id = ?",
                [(turn_id, now, record_id) for record_id in record_ids],
            )

        await self._db.run(claim, durable=False)

    async def finished(self, turn_id: str) -> bool:
        """Whether the turn is committed (done or failed); ``True`` for one never opened."""

        def query(conn: Connection) -> bool:
            row = conn.execute("SELECT state FROM turns WHERE id = ?", (turn_id,)).fetchone()
            return row is None or row[0] != "running"

        return await self._db.run(query, durable=False)

    async def failed(self, turn_id: str) -> bool:
        """Whether the turn was committed as failed (a model that failed, a timeout, a
        crash): its last message is a notice that it could not answer."""

        def query(conn: Connection) -> bool:
            row = conn.execute("SELECT state FROM turns WHERE id = ?", (turn_id,)).fetchone()
            return row is not None and row[0] == "failed"

        return await self._db.run(query, durable=False)

    async def request_stop(self, turn_id: str) -> None:
        """Someone asked the turn to stop: durable, so a restart closes it instead of
        resuming it."""
        now = self._clock()
        await self._db.run(
            lambda conn: conn.execute(
                "UPDATE turns SET stop_requested_at = COALESCE(stop_requested_at, ?),"
                " updated_at = ? WHERE id = ? AND state = 'running'",
                (now, now, turn_id),
            )
        )

    async def close_unanswered(self, record_ids: Sequence[int]) -> None:
        """Messages that get no turn of their own (dropped by ``/stop``, an edit of a message
        already answered, a control answered beside the queue without a reply)."""
        if record_ids:
            await self._db.run(lambda conn: self.close_statement(conn, record_ids))

    def close_statement(self, conn: Connection, record_ids: Sequence[int]) -> None:
        """:meth:`close_unanswered` as part of a transaction."""
        now = self._clock()
        conn.executemany(
            "UPDATE inbound SET state = 'done', updated_at = ? WHERE id = ? AND state = 'pending'",
            [(now, record_id) for record_id in record_ids],
        )

    async def message(self, channel: str, platform_id: str) -> InboundMessage | None:
        """The message a platform id names on ``channel``, as it was journaled (``None``:
        never seen here, or pruned)."""

        def query(conn: Connection) -> InboundMessage | None:
            row = conn.execute(
                "SELECT payload FROM inbound WHERE channel = ? AND platform_id = ?",
                (channel, platform_id),
            ).fetchone()
            return None if row is None else InboundMessage.from_dict(json.loads(row[0]))

        return await self._db.run(query, durable=False)

    async def last_chat(self, session_key: str, channels: Sequence[str]) -> ChatRef | None:
        """The chat (on one of ``channels``) of the newest journaled message a turn of the
        session took: where its person wrote last. ``None`` when none is kept (a session of
        the gateway's own work, or one quiet for longer than the journal keeps messages)."""
        if not channels:
            return None
        marks = ",".join("?" for _ in channels)

        def query(conn: Connection) -> ChatRef | None:
            row = conn.execute(
                "SELECT i.payload FROM turns t JOIN inbound i ON i.turn_id = t.id"
                f" WHERE t.session_key = ? AND i.channel IN ({marks})"
                " ORDER BY i.id DESC LIMIT 1",
                (session_key, *channels),
            ).fetchone()
            return None if row is None else InboundMessage.from_dict(json.loads(row[0])).chat

        return await self._db.run(query, durable=False)

    async def find(self, channel: str, platform_id: str) -> tuple[int, str, str | None] | None:
        """The journal row of a platform message: its id, state and turn."""

        def query(conn: Connection) -> tuple[int, str, str | None] | None:
            row = conn.execute(
                "SELECT id, state, turn_id FROM inbound WHERE channel = ? AND platform_id = ?",
                (channel, platform_id),
            ).fetchone()
            return None if row is None else (int(row[0]), str(row[1]), row[2])

        return await self._db.run(query, durable=False)

    async def retry_turn(self, turn_id: str) -> int:
        """Count one more attempt at a resumed turn; returns the new attempt number."""
        now = self._clock()

        def bump(conn: Connection) -> int:
            conn.execute(
                "UPDATE turns SET attempts = attempts + 1, updated_at = ? WHERE id = ?",
                (now, turn_id),
            )
            (attempts,) = conn.execute(
                "SELECT attempts FROM turns WHERE id = ?", (turn_id,)
            ).fetchone()
            return int(attempts)

        return await self._db.run(bump)

    async def open_turns(self, session_key: str) -> list[tuple[str, int]]:
        """The turns of ``session_key`` still running (id, attempts so far), oldest first:
        a background task's, after a restart."""

        def load(conn: Connection) -> list[tuple[str, int]]:
            rows = conn.execute(
                "SELECT id, attempts FROM turns WHERE session_key = ? AND state = 'running'"
                " ORDER BY created_at",
                (session_key,),
            )
            return [(str(turn_id), int(attempts)) for turn_id, attempts in rows]

        return await self._db.run(load, durable=False)

    async def last_turns(self, session_keys: Sequence[str]) -> dict[str, LastTurn]:
        """The latest turn of each of ``session_keys`` that has one on record (a scheduled
        job's last outcome: its session is ``cron:<job id>``)."""
        if not session_keys:
            return {}

        def load(conn: Connection) -> dict[str, LastTurn]:
            marks = ",".join("?" for _ in session_keys)
            latest: dict[str, LastTurn] = {}
            for key, state, at in conn.execute(
                f"SELECT session_key, state, updated_at FROM turns WHERE session_key IN ({marks})"
                " ORDER BY updated_at",
                tuple(session_keys),
            ):
                latest[key] = LastTurn(str(state), float(at))
            return latest

        return await self._db.run(load, durable=False)

    def finish_statement(self, conn: Connection, turn_id: str, state: TurnEnd = "done") -> None:
        """Close a turn and its inbound messages; part of the turn's commit transaction."""
        now = self._clock()
        conn.execute(
            "UPDATE turns SET state = ?, updated_at = ? WHERE id = ?", (state, now, turn_id)
        )
        conn.execute(
            "UPDATE inbound SET state = 'done', updated_at = ? WHERE turn_id = ?", (now, turn_id)
        )

    async def open_work(self) -> OpenWork:
        def load(conn: Connection) -> OpenWork:
            pending = tuple(
                _record(row)
                for row in conn.execute(
                    "SELECT id, payload, turn_id FROM inbound WHERE state = 'pending' ORDER BY id"
                )
            )
            return OpenWork(pending, _running(conn, "", ()))

        return await self._db.run(load, durable=False)

    # -- a cluster's nodes share the work (gateway/runtime/cluster/work.py) ----------------

    async def pending(
        self, limit: int = 1000, known: Mapping[int, InboundRecord] | None = None
    ) -> list[InboundRecord]:
        """Messages no turn has taken yet, oldest first. Those in ``known`` (by id, from an
        earlier call) are neither read again nor decoded."""
        after = max(known, default=0) if known else 0

        def load(conn: Connection) -> list[InboundRecord]:
            rows = conn.execute(
                "SELECT id, CASE WHEN id > ? THEN payload END, turn_id FROM inbound"
                " WHERE state = 'pending' ORDER BY id LIMIT ?",
                (after, limit),
            )
            records = []
            for row_id, new_payload, turn_id in rows:
                record = known.get(row_id) if known and new_payload is None else None
                if record is None:
                    payload = new_payload
                    if payload is None:  # older than ``after`` yet unknown: read it
                        payload = conn.execute(
                            "SELECT payload FROM inbound WHERE id = ?", (row_id,)
                        ).fetchone()[0]
                    record = _record((row_id, payload, turn_id))
                records.append(record)
            return records

        return await self._db.run(load, durable=False)

    async def running_sessions(self) -> list[str]:
        """The sessions with a turn left running (by a node that may have died)."""

        def load(conn: Connection) -> list[str]:
            rows = conn.execute(f"SELECT DISTINCT session_key FROM turns WHERE {_OPEN_TURNS}")
            return [str(key) for (key,) in rows]

        return await self._db.run(load, durable=False)

    async def session_work(
        self, session_key: str, chat_keys: Sequence[str], *, claim_by: str | None = None
    ) -> OpenWork:
        """What one session has open: its running turns (a node died in them) and the
        pending messages of ``chat_keys`` (the chats whose messages join it). ``claim_by``:
        claim the session for that node first, in the same transaction (a new epoch, which
        every later write of the node's turns carries: gateway/store/cluster/fencing.py), and retire
        the drafts the earlier claim's turns posted (gateway/store/drafts.py)."""
        now = self._clock()

        # the claim first (its row lock waits for the writes of the claim before), then
        # what the session has open: one round trip on PostgreSQL
        statements: list[Statement] = []
        if claim_by is not None:
            statements.append(claim_statement(session_key, claim_by, now))
        marks = ",".join("?" for _ in chat_keys) or "NULL"  # no chats: no rows
        statements.append(
            (
                "SELECT id, payload, turn_id FROM inbound WHERE state = 'pending'"
                f" AND session_key IN ({marks}) ORDER BY id",
                tuple(chat_keys),
            )
        )
        statements.append(_running_statement(" AND session_key = ?", (session_key,)))

        def load(conn: Connection) -> OpenWork:
            *claimed, waiting, running_turns = conn.execute_together(statements)
            epoch = 0 if claim_by is None else claimed_epoch(claimed[0])
            pending = tuple(_record(row) for row in waiting)
            running = _open_turns(conn, running_turns.fetchall())
            if claim_by is not None and running:  # a node left them: it may still draft
                retire_statement(conn, session_key)
            return OpenWork(pending, running, epoch)

        return await self._db.run(load, durable=False)

    async def counts(self) -> dict[str, int]:
        def load(conn: Connection) -> dict[str, int]:
            rows = conn.execute(
                "SELECT state, COUNT(*) FROM inbound WHERE state != 'done' GROUP BY state"
            )
            return {state: int(count) for state, count in rows}

        return await self._db.run(load, durable=False)

    async def open_count(self, channel: str | None = None) -> int:
        """Messages not yet answered: waiting, or in a running turn. A turn that waits for
        a person's approval runs no more until someone decides, so its messages are not
        counted: what waits for the work to settle (a ``chat -m``) may send the decision."""
        where = (
            "state != 'done' AND (turn_id IS NULL OR turn_id NOT IN"
            " (SELECT turn_id FROM approvals WHERE state = 'pending'))"
        )

        def load(conn: Connection) -> int:
            if channel is None:
                row = conn.execute(f"SELECT COUNT(*) FROM inbound WHERE {where}").fetchone()
            else:
                row = conn.execute(
                    f"SELECT COUNT(*) FROM inbound WHERE {where} AND channel = ?", (channel,)
                ).fetchone()
            return int(row[0])

        return await self._db.run(load, durable=False)

    async def prune(self, older_than_seconds: float, *, now: float | None = None) -> int:
        """Forget finished messages older than the dedup window."""
        cutoff = (self._clock() if now is None else now) - older_than_seconds
        return await delete_batched(
            self._db, "inbound", "state = 'done' AND updated_at < ?", [cutoff]
        )

    async def prune_turns(self, before: float) -> int:
        """Forget finished turns last touched before ``before``; running ones are resumed
        after a restart and stay. Keep turns at least as long as the inbound journal, so a
        journaled message never points at a forgotten turn."""
        return await delete_batched(
            self._db, "turns", "state IN ('done', 'failed') AND updated_at < ?", [before]
        )
