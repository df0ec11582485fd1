"""Approval requests: a side effect the policy refused but the owner could allow, waiting.

One row per tool call (``call_key`` = turn id + call id) that asked. It is written in the
same transaction that parks the turn and queues the request to the approvers
(:meth:`gateway.store.Store.park_turn`), so a restart finds the request and its waiting turn
together. The state moves once, from ``pending`` to ``approved``, ``denied``, ``expired``
(nobody decided in time) or ``refused`` (nobody could approve it); the agent reads it when
the turn resumes (:mod:`agent.approval`).
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gateway.store.access import CODE_ALPHABET
from gateway.store.engine.db import Database
from gateway.store.engine.retention import delete_batched
from gateway.store.engine.sql import Connection

ID_LENGTH = 8
_COLUMNS = (
    "id, call_key, turn_id, session_key, tool, arguments, fingerprint, reason, requester,"
    " approvers, state, created_at, expires_at, decided_at, decided_by, reach"
)


def approval_id(call_key: str) -> str:
    """The request's code, derived from the call: asking again for the same call (a resumed
    turn) finds the same request. No look-alike characters, so it can be typed."""
    digest = hashlib.sha256(call_key.encode()).digest()
    return "".join(CODE_ALPHABET[b % len(CODE_ALPHABET)] for b in digest[:ID_LENGTH])


class ApprovalState(enum.StrEnum):
    """Where a request is: it moves once, from PENDING to one of the others."""

    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"  # nobody decided in time
    REFUSED = "refused"  # nobody could decide it (no approver reachable)


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    id: str
    call_key: str
    turn_id: str
    session_key: str
    tool: str
    arguments: dict[str, Any]  # redacted, as approvers see them
    fingerprint: str  # of the exact arguments: an approval covers only these
    reason: str
    requester: dict[str, str]  # channel, sender_id, sender_name, role, chat_type
    approvers: tuple[str, ...]  # "channel:sender id"; "channel:*" for local channels
    state: ApprovalState
    created_at: float
    expires_at: float
    decided_at: float | None = None
    decided_by: str | None = None
    reach: str = ""  # what the call could read and write once run (exec's sandbox view)

    @property
    def pending(self) -> bool:
        return self.state is ApprovalState.PENDING

    def row(self) -> tuple[Any, ...]:
        return (
            self.id,
            self.call_key,
            self.turn_id,
            self.session_key,
            self.tool,
            json.dumps(self.arguments, ensure_ascii=False),
            self.fingerprint,
            self.reason,
            json.dumps(self.requester, ensure_ascii=False),
            json.dumps(list(self.approvers)),
            self.state,
            self.created_at,
            self.expires_at,
            self.decided_at,
            self.decided_by,
            self.reach,
        )


def _record(row: Sequence[Any]) -> ApprovalRequest:
    values = list(row)
    values[5] = json.loads(values[5])
    values[8] = json.loads(values[8])
    values[9] = tuple(json.loads(values[9]))
    values[10] = ApprovalState(values[10])
    return ApprovalRequest(*values)


class ApprovalRequests:
    def __init__(self, db: Database) -> None:
        self._db = db

    def insert_statement(self, conn: Connection, record: ApprovalRequest) -> None:
        """Part of the park transaction; asking again for the same call changes nothing."""
        conn.execute(
            f"INSERT INTO approvals ({_COLUMNS}) VALUES ({', '.join('?' * 16)})"
            " ON CONFLICT (call_key) DO NOTHING",
            record.row(),
        )

    async def get(self, approval: str) -> ApprovalRequest | None:
        return await self._one("id = ?", approval.upper())

    async def for_call(self, call_key: str) -> ApprovalRequest | None:
        """The request a tool call made, if any (read by the executor on resume)."""
        return await self._one("call_key = ?", call_key)

    async def _one(self, where: str, value: str) -> ApprovalRequest | None:
        def query(conn: Connection) -> ApprovalRequest | None:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM approvals WHERE {where}", (value,)
            ).fetchone()
            return None if row is None else _record(row)

        return await self._db.run(query, durable=False)

    async def decide(
        self, approval: str, state: ApprovalState, *, by: str, at: float
    ) -> ApprovalRequest | None:
        """Move a pending request to ``state``; ``None`` when it was not pending (already
        decided, expired, or unknown): a decision is made once."""
        assert state is not ApprovalState.PENDING

        def update(conn: Connection) -> ApprovalRequest | None:
            changed = conn.execute(
                "UPDATE approvals SET state = ?, decided_at = ?, decided_by = ?"
                " WHERE id = ? AND state = 'pending'",
                (state, at, by, approval.upper()),
            ).rowcount
            if not changed:
                return None
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM approvals WHERE id = ?", (approval.upper(),)
            ).fetchone()
            return _record(row)

        return await self._db.run(update)

    async def pending(self) -> list[ApprovalRequest]:
        """Requests still waiting, soonest expiry first."""

        def query(conn: Connection) -> list[ApprovalRequest]:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM approvals WHERE state = 'pending' ORDER BY expires_at"
            )
            return [_record(row) for row in rows]

        return await self._db.run(query, durable=False)

    async def decided(self, limit: int) -> list[ApprovalRequest]:
        """The ``limit`` requests decided last, newest first."""

        def query(conn: Connection) -> list[ApprovalRequest]:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM approvals WHERE state != 'pending'"
                " ORDER BY decided_at DESC LIMIT ?",
                (limit,),
            )
            return [_record(row) for row in rows]

        return await self._db.run(query, durable=False)

    async def prune(self, before: float) -> int:
        """Forget decided requests older than ``before``; pending ones stay (they expire)."""
        return await delete_batched(
            self._db, "approvals", "state != 'pending' AND created_at < ?", [before]
        )
