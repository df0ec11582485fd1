"""Pairing requests and the audit log.

A pairing request gives an unknown DM sender one short code. The owner approves it with
``switchboard pairing approve CODE`` (or ``/pair approve CODE`` from an admin chat); from
then on the sender is treated as if listed in ``allow_from``. Open requests per channel are
capped; when the queue is full the oldest one expires, so throwaway accounts cannot keep
real newcomers out for an hour, and accounts the platform says are new share one slot.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from gateway.store.engine.db import Database
from gateway.store.engine.retention import delete_batched
from gateway.store.engine.sql import Connection

Clock = Callable[[], float]

# No look-alikes: no 0/O, 1/I/L.
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


PairingState = Literal["pending", "approved", "denied", "revoked", "expired"]


@dataclass(frozen=True, slots=True)
class PairingRequest:
    code: str
    channel: str
    sender_id: str
    sender_name: str
    chat_id: str
    state: PairingState
    created_at: float
    expires_at: float


@dataclass(frozen=True, slots=True)
class Requested:
    """A sender's open request, or ``None`` when the channel's queue is full: then the
    live requests are kept and the new one is dropped (``dropped``, with the oldest live
    request it made way for, for the owner's notice)."""

    request: PairingRequest | None
    expired: tuple[PairingRequest, ...] = ()  # unused since requests are no longer evicted
    oldest: PairingRequest | None = None


_COLUMNS = "code, channel, sender_id, sender_name, chat_id, state, created_at, expires_at"


def _row(row: tuple[Any, ...]) -> PairingRequest:
    return PairingRequest(*row)


class Pairings:
    def __init__(self, db: Database, *, clock: Clock = time.time) -> None:
        self._db = db
        self._clock = clock

    async def request(
        self,
        *,
        channel: str,
        sender_id: str,
        sender_name: str,
        chat_id: str,
        ttl: float = 3600.0,
        max_pending: int = 3,
        young: Callable[[str], bool] = lambda sender_id: False,
    ) -> Requested:
        """The sender's open request, created if needed. A full queue (``max_pending`` live
        requests of the channel) keeps them and refuses the new one, so senders with
        rotating ids cannot push each other out and get a code each; a ``young`` sender (a
        new platform account) is refused while another young one holds a slot, so new
        accounts never hold more than one."""
        now = self._clock()

        def upsert(conn: Connection) -> Requested:
            conn.execute(
                "UPDATE pairing SET state = 'expired' WHERE state = 'pending' AND expires_at <= ?",
                (now,),
            )
            existing = conn.execute(
                f"SELECT {_COLUMNS} FROM pairing WHERE channel = ? AND sender_id = ?"
                " AND state = 'pending'",
                (channel, sender_id),
            ).fetchone()
            if existing is not None:
                return Requested(_row(existing))
            pending = [
                _row(row)
                for row in conn.execute(
                    f"SELECT {_COLUMNS} FROM pairing WHERE channel = ? AND state = 'pending'"
                    f" ORDER BY created_at, {conn.dialect.rowid}",
                    (channel,),
                )
            ]
            full = len(pending) >= max_pending
            if full or (young(sender_id) and any(young(r.sender_id) for r in pending)):
                return Requested(None, oldest=pending[0])
            code = new_code()
            conn.execute(
                f"INSERT INTO pairing ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)",
                (code, channel, sender_id, sender_name, chat_id, now, now + ttl),
            )
            request = PairingRequest(
                code, channel, sender_id, sender_name, chat_id, "pending", now, now + ttl
            )
            return Requested(request)

        return await self._db.run(upsert)

    async def clear(self, *, channel: str | None = None) -> list[PairingRequest]:
        """Deny every open request (of ``channel`` only, when given); the ones cleared."""
        now = self._clock()

        def update(conn: Connection) -> list[PairingRequest]:
            rows = [
                _row(row)
                for row in conn.execute(
                    f"SELECT {_COLUMNS} FROM pairing WHERE state = 'pending'"
                    " AND (? IS NULL OR channel = ?) ORDER BY created_at",
                    (channel, channel),
                )
            ]
            conn.executemany(
                "UPDATE pairing SET state = 'denied', decided_at = ? WHERE code = ?",
                [(now, r.code) for r in rows],
            )
            return rows

        return await self._db.run(update)

    async def is_approved(self, channel: str, sender_id: str) -> bool:
        def query(conn: Connection) -> bool:
            row = conn.execute(
                "SELECT 1 FROM pairing WHERE channel = ? AND sender_id = ? AND state = 'approved'",
                (channel, sender_id),
            ).fetchone()
            return row is not None

        return await self._db.run(query, durable=False)

    async def decide(
        self, code: str, state: str, *, channel: str | None = None
    ) -> PairingRequest | None:
        """Approve or deny a pending code (of ``channel`` only, when given); ``None`` if there
        is no such pending, unexpired code."""
        now = self._clock()
        code = code.strip().upper()

        def update(conn: Connection) -> PairingRequest | None:
            cursor = conn.execute(
                "UPDATE pairing SET state = ?, decided_at = ? WHERE code = ? AND state = 'pending'"
                " AND expires_at > ? AND (? IS NULL OR channel = ?)",
                (state, now, code, now, channel, channel),
            )
            if cursor.rowcount == 0:
                return None
            row = conn.execute(f"SELECT {_COLUMNS} FROM pairing WHERE code = ?", (code,)).fetchone()
            return _row(row)

        return await self._db.run(update)

    async def revoke(self, channel: str, sender_id: str) -> bool:
        now = self._clock()

        def update(conn: Connection) -> bool:
            cursor = conn.execute(
                "UPDATE pairing SET state = 'revoked', decided_at = ? WHERE channel = ?"
                " AND sender_id = ? AND state = 'approved'",
                (now, channel, sender_id),
            )
            return cursor.rowcount > 0

        return await self._db.run(update)

    async def listing(
        self, *, include_decided: bool = False, channel: str | None = None
    ) -> list[PairingRequest]:
        now = self._clock()

        def query(conn: Connection) -> list[PairingRequest]:
            if include_decided:
                rows = conn.execute(f"SELECT {_COLUMNS} FROM pairing ORDER BY created_at")
            else:
                rows = conn.execute(
                    f"SELECT {_COLUMNS} FROM pairing WHERE (state = 'pending' AND expires_at > ?)"
                    " OR state = 'approved' ORDER BY created_at",
                    (now,),
                )
            found = [_row(row) for row in rows]
            return [r for r in found if channel is None or r.channel == channel]

        return await self._db.run(query, durable=False)

    async def prune(self, before: float) -> int:
        """Forget requests denied, revoked or expired before ``before``. Approved ones are
        the pairing allowlist and are never pruned; open ones stay until they expire."""
        return await delete_batched(
            self._db,
            "pairing",
            "(state IN ('denied', 'revoked', 'expired') AND COALESCE(decided_at, expires_at) < ?)"
            " OR (state = 'pending' AND expires_at < ?)",
            [before, before],
        )


@dataclass(frozen=True, slots=True)
class AuditEntry:
    at: float
    kind: str
    channel: str | None
    sender_id: str | None
    detail: dict[str, Any]


class AuditLog:
    """Every refusal and every access decision, for the owner to review."""

    def __init__(self, db: Database, *, clock: Clock = time.time) -> None:
        self._db = db
        self._clock = clock

    async def record(
        self,
        kind: str,
        *,
        channel: str | None = None,
        sender_id: str | None = None,
        detail: dict[str, Any] | None = None,
        **fields: Any,
    ) -> None:
        detail = {**(detail or {}), **fields}
        now = self._clock()
        encoded = json.dumps(detail, ensure_ascii=False, default=str)
        await self._db.run(
            lambda conn: conn.execute(
                "INSERT INTO audit (at, kind, channel, sender_id, detail) VALUES (?, ?, ?, ?, ?)",
                (now, kind, channel, sender_id, encoded),
            )
        )

    async def count(self, kind: str, *, channel: str, sender_id: str, since: float) -> int:
        """Entries of ``kind`` about one person since ``since`` (per-person caps)."""

        def query(conn: Connection) -> int:
            (found,) = conn.execute(
                "SELECT COUNT(*) FROM audit WHERE at >= ? AND kind = ? AND channel = ?"
                " AND sender_id = ?",
                (since, kind, channel, sender_id),
            ).fetchone()
            return int(found)

        return await self._db.run(query, durable=False)

    async def recent(self, limit: int = 50, kind: str | None = None) -> list[AuditEntry]:
        def query(conn: Connection) -> list[AuditEntry]:
            if kind is None:
                rows = conn.execute(
                    "SELECT at, kind, channel, sender_id, detail FROM audit ORDER BY id DESC LIMIT ?",
                    (limit,),
                )
            else:
                rows = conn.execute(
                    "SELECT at, kind, channel, sender_id, detail FROM audit WHERE kind = ?"
                    " ORDER BY id DESC LIMIT ?",
                    (kind, limit),
                )
            return [AuditEntry(at, k, ch, s, json.loads(d)) for at, k, ch, s, d in rows]

        return await self._db.run(query, durable=False)

    async def prune(self, before: float) -> int:
        """Forget entries recorded before ``before``."""
        return await delete_batched(self._db, "audit", "at < ?", [before])
