"""Idempotency ledger for side-effecting tool calls, and a small key-value table.

Before a side-effecting tool runs, ``turn id + call id`` is recorded as *started*; its
result is recorded as *done*. A resumed turn that meets the same call reuses the result,
or, when the process died between the two, is told the outcome is unknown instead of
repeating the effect (an email is never sent twice).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from gateway.store.engine.db import Database
from gateway.store.engine.retention import delete_batched
from gateway.store.engine.sql import Connection

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    key: str
    tool: str
    state: Literal["started", "done"]  # started: its outcome is unknown until done
    result: str | None
    target: str = ""  # what the call acted on, as its arguments name it ("" for nothing)

    def described(self) -> str:
        """The call as a person reads it: "write_file notes/plan.md", "exec"."""
        return f"{self.tool} {self.target}" if self.target else self.tool


class ToolLedger:
    def __init__(self, db: Database, *, clock: Clock = time.time) -> None:
        self._db = db
        self._clock = clock

    async def get(self, key: str) -> LedgerEntry | None:
        def query(conn: Connection) -> LedgerEntry | None:
            row = conn.execute(
                "SELECT key, tool, state, result, target FROM tool_ledger WHERE key = ?",
                (key,),
            ).fetchone()
            return None if row is None else LedgerEntry(*row)

        return await self._db.run(query, durable=False)

    async def start(self, key: str, tool: str, target: str = "") -> bool:
        """Record intent; ``False`` if this call was already started before. ``target``:
        what the call acts on (a path, a recipient), already redacted."""
        now = self._clock()

        def insert(conn: Connection) -> bool:
            cursor = conn.execute(
                "INSERT INTO tool_ledger (key, tool, target, state, created_at, updated_at)"
                " VALUES (?, ?, ?, 'started', ?, ?) ON CONFLICT (key) DO NOTHING",
                (key, tool, target, now, now),
            )
            return cursor.rowcount == 1

        return await self._db.run(insert)

    async def finish(self, key: str, result: str) -> None:
        now = self._clock()
        await self._db.run(
            lambda conn: conn.execute(
                "UPDATE tool_ledger SET state = 'done', result = ?, updated_at = ? WHERE key = ?",
                (result, now, key),
            )
        )

    async def of_turn(self, turn_id: str) -> list[LedgerEntry]:
        """The side effects a turn started, in order (keys are ``turn id:call id``)."""

        def query(conn: Connection) -> list[LedgerEntry]:
            rows = conn.execute(
                "SELECT key, tool, state, result, target FROM tool_ledger WHERE key LIKE ?"
                " ORDER BY created_at",
                (turn_id + ":%",),
            )
            return [LedgerEntry(*row) for row in rows]

        return await self._db.run(query, durable=False)

    async def prune(self, before: float) -> int:
        """Forget calls last touched before ``before``, unless their turn is still open (a
        resumed turn must find its calls). Keys are ``turn id:call id``."""
        return await delete_batched(
            self._db,
            "tool_ledger",
            f"updated_at < ? AND {self._db.dialect.before_colon('key')} NOT IN"
            " (SELECT id FROM turns WHERE state IN ('running', 'answered'))",
            [before],
        )


class KeyValue:
    """Small JSON values that must survive restarts (last active chat, offsets, ...)."""

    def __init__(self, db: Database, *, clock: Clock = time.time) -> None:
        self._db = db
        self._clock = clock

    async def get(self, key: str) -> Any:
        def query(conn: Connection) -> Any:
            row = conn.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
            return None if row is None else json.loads(row[0])

        return await self._db.run(query, durable=False)

    def set_statement(self, conn: Connection, key: str, value: Any) -> None:
        conn.execute(
            "INSERT INTO kv (key, value, updated_at) VALUES (?, ?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value,"
            " updated_at = excluded.updated_at",
            (key, json.dumps(value, ensure_ascii=False), self._clock()),
        )

    async def set(self, key: str, value: Any) -> None:
        await self._db.run(lambda conn: self.set_statement(conn, key, value))
