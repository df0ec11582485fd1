"""Token usage per turn, as the provider reported it (for status, budgets and cost)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway.store.db import Database
from gateway.store.retention import delete_batched


@dataclass(frozen=True, slots=True)
class UsageRecord:
    channel: str
    model: str
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    at: float | None = None
    principal: str | None = None  # "channel:sender id" of the person the turn acted for

    def insert_statement(self, conn: sqlite3.Connection, turn_id: str, session_key: str) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO usage (turn_id, session_key, channel, at, model, input_tokens,"
            " output_tokens, cache_read_tokens, cache_write_tokens, principal)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                turn_id,
                session_key,
                self.channel,
                self.at if self.at is not None else time.time(),
                self.model,
                self.input_tokens,
                self.output_tokens,
                self.cache_read_tokens,
                self.cache_write_tokens,
                self.principal,
            ),
        )


@dataclass(frozen=True, slots=True)
class UsageTotals:
    key: str  # the day (YYYY-MM-DD) or the session
    turns: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int


@dataclass(frozen=True, slots=True)
class PersonUsage:
    tokens: int
    turns: int


class UsageReport:
    def __init__(self, db: Database, *, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self._clock = clock

    async def record(self, turn_id: str, session_key: str, record: UsageRecord) -> None:
        await self._db.run(lambda conn: record.insert_statement(conn, turn_id, session_key))

    async def since(self, seconds: float, *, by: str = "day") -> list[UsageTotals]:
        """Totals per day (local time) or per session over the last ``seconds``."""
        group = "date(at, 'unixepoch', 'localtime')" if by == "day" else "session_key"
        cutoff = self._clock() - seconds

        def query(conn: sqlite3.Connection) -> list[UsageTotals]:
            rows = conn.execute(
                f"SELECT {group}, COUNT(*), SUM(input_tokens), SUM(output_tokens),"
                f" SUM(cache_read_tokens) FROM usage WHERE at >= ? GROUP BY {group}"
                " ORDER BY 1",
                (cutoff,),
            )
            return [UsageTotals(str(k), int(n), int(i), int(o), int(c)) for k, n, i, o, c in rows]

        return await self._db.run(query)

    async def tokens_today(self, session_prefix: str = "") -> int:
        """Input + output tokens since local midnight (for daily budgets)."""

        def query(conn: sqlite3.Connection) -> int:
            (total,) = conn.execute(
                "SELECT COALESCE(SUM(input_tokens + output_tokens), 0) FROM usage"
                " WHERE date(at, 'unixepoch', 'localtime') = date(?, 'unixepoch', 'localtime')"
                " AND session_key LIKE ?",
                (self._clock(), session_prefix + "%"),
            ).fetchone()
            return int(total)

        return await self._db.run(query)

    async def by_principal(
        self, principal: str, *, since: float, turns_since: float
    ) -> PersonUsage:
        """Tokens one person's turns used since ``since`` and their turns since ``turns_since``."""

        def query(conn: sqlite3.Connection) -> PersonUsage:
            tokens, turns = conn.execute(
                "SELECT COALESCE(SUM(CASE WHEN at >= ? THEN input_tokens + output_tokens END), 0),"
                " COUNT(CASE WHEN at >= ? THEN 1 END) FROM usage"
                " WHERE principal = ? AND at >= ?",
                (since, turns_since, principal, min(since, turns_since)),
            ).fetchone()
            return PersonUsage(int(tokens), int(turns))

        return await self._db.run(query)

    async def prune(self, before: float) -> int:
        """Forget usage recorded before ``before`` (keep at least the status page's days)."""
        return await delete_batched(self._db, "usage", "at < ?", [before])
