"""Token usage of every model call, as the provider reported it (for status, budgets, cost);
``estimated_tokens`` says how many we counted ourselves because the server reported none,
``cost_usd`` what the calls cost at the prices of ``[llm.prices]`` when they were made
(``NULL``: the model has no price).

A turn's calls are committed with the turn, one row per purpose and model (keyed by the
turn and its run, so a repeated commit stores nothing twice). A turn that goes on after a
call (to run tools) stores its count so far at once, in the row its commit replaces: a crash
or a restart before the commit loses nothing from the caps, and the turn's next run adds
rows of its own. Calls outside a turn (reflection, a background summary) get a row each as
they happen. ``purpose`` says why the model was asked, ``principal`` whose allowance it
counts against, ``agent`` which agent it served.
Background work is told by its session's kind, which is the row's ``channel``
(:data:`BACKGROUND_CHANNELS`).

A day is the owner's (``user.timezone``, the store's ``zone``), as for the money caps
(gateway/runtime/people/spend.py), whatever the zone of the machine or the database
server: its bounds are worked out here (a day of 23 or 25 hours included) and the rows are
counted between them, the same SQL on both engines.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Literal

from gateway.core.clock import day_start
from gateway.core.usage import Purpose
from gateway.store.engine.db import Database
from gateway.store.engine.retention import delete_batched
from gateway.store.engine.sql import Connection, Cursor

_REPLACE = ", ".join(
    f"{column} = excluded.{column}"
    for column in [
        "turn_id",
        "session_key",
        "channel",
        "purpose",
        "principal",
        "at",
        "model",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "estimated_tokens",
        "cost_usd",
        "agent",
    ]
)

# The ``channel`` of rows of work nobody waits for: a session ``heartbeat:main``,
# ``cron:<job>`` or ``subagent:<task>`` (gateway.runtime.turns.accounting.channel_of).
BACKGROUND_CHANNELS = ("heartbeat", "cron", "subagent")


@dataclass(frozen=True, slots=True)
class UsageRecord:
    channel: str
    model: str
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    at: float | None = None
    principal: str | None = None  # "channel:sender id" of the person it is charged to
    purpose: Purpose = Purpose.TURN
    estimated_tokens: int = 0  # of input + output: counted by us, the server reported none
    cost_usd: float | None = None  # at the model's price; None: it has none
    agent: str = "main"
    part: str = ""  # the run of the turn (agent.llm.metered.TurnUsage.part); "": the turn's

    def insert_statement(
        self, conn: Connection, turn_id: str | None, session_key: str, row_id: str = ""
    ) -> None:
        """Insert (or, for the same id, replace) the row; the id defaults to the turn's
        purpose, model and run of the turn."""
        conn.execute(
            "INSERT INTO usage (id, turn_id, session_key, channel, purpose, principal,"
            " at, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,"
            " estimated_tokens, cost_usd, agent) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
            " ?, ?)"
            f" ON CONFLICT (id) DO UPDATE SET {_REPLACE}",
            (
                row_id
                or f"{turn_id}:{self.purpose}:{self.model}" + (self.part and f":{self.part}"),
                turn_id,
                session_key,
                self.channel,
                self.purpose,
                self.principal,
                self.at if self.at is not None else time.time(),
                self.model,
                self.input_tokens,
                self.output_tokens,
                self.cache_read_tokens,
                self.cache_write_tokens,
                self.estimated_tokens,
                self.cost_usd,
                self.agent,
            ),
        )


@dataclass(frozen=True, slots=True)
class UsageTotals:
    key: str  # the day (YYYY-MM-DD), the session, the agent or the person
    turns: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    estimated_tokens: int = 0  # of input + output: counted by us, not reported
    cost_usd: float | None = None  # None: no call of these had a price


SpendScope = Literal["gateway", "person", "background", "agent"]


@dataclass(frozen=True, slots=True)
class Spender:
    """Whose spending a money cap counts: everyone's, one person's (``subject``: their
    ``channel:sender id``), background work's, or one agent's (``subject``: its name)."""

    scope: SpendScope
    subject: str = ""

    def condition(self) -> tuple[str, tuple[str, ...]]:
        """The SQL condition on a usage row, and its parameters."""
        if self.scope == "person":
            return "principal = ?", (self.subject,)
        if self.scope == "agent":
            return "agent = ?", (self.subject,)
        if self.scope == "background":
            return f"channel IN ({', '.join('?' * len(BACKGROUND_CHANNELS))})", BACKGROUND_CHANNELS
        return "1 = 1", ()


# How usage is added up: per day (the owner's), conversation (session), agent, person
# (principal), model.
UsageGroup = Literal["day", "session", "agent", "person", "model"]


@dataclass(frozen=True, slots=True)
class PersonUsage:
    tokens: int
    turns: int


class UsageReport:
    def __init__(
        self, db: Database, *, clock: Callable[[], float] = time.time, zone: tzinfo = UTC
    ) -> None:
        self._db = db
        self._clock = clock
        self._zone = zone  # whose days: the owner's (user.timezone)

    async def record(self, turn_id: str, session_key: str, record: UsageRecord) -> None:
        """A turn's usage for one purpose and model (replaces an earlier row of the same)."""
        await self._db.run(lambda conn: record.insert_statement(conn, turn_id, session_key))

    async def record_call(self, turn_id: str | None, session_key: str, record: UsageRecord) -> None:
        """One model call outside a turn: a row of its own."""
        row_id = f"{turn_id or session_key}:{record.purpose}:{uuid.uuid4().hex[:12]}"
        await self._db.run(lambda conn: record.insert_statement(conn, turn_id, session_key, row_id))

    async def last_turn(self, session_key: str) -> tuple[int, int, int] | None:
        """The prompt of the session's last turn as the provider reported it (input, cache
        read, cache written tokens), or ``None`` before its first."""

        def query(conn: Connection) -> tuple[int, int, int] | None:
            row = conn.execute(
                "SELECT input_tokens, cache_read_tokens, cache_write_tokens FROM usage"
                " WHERE session_key = ? AND purpose = 'turn' ORDER BY at DESC LIMIT 1",
                (session_key,),
            ).fetchone()
            return None if row is None else (int(row[0]), int(row[1]), int(row[2]))

        return await self._db.run(query, durable=False)

    async def since(self, seconds: float, *, by: UsageGroup = "day") -> list[UsageTotals]:
        """Totals per day (the owner's), session, agent, person or model over the last
        ``seconds`` (usage charged to nobody, such as a heartbeat's, is the person ``""``)."""
        now = self._clock()
        cutoff = now - seconds
        totals = (
            "COUNT(DISTINCT turn_id), SUM(input_tokens), SUM(output_tokens),"
            " SUM(cache_read_tokens), SUM(estimated_tokens), SUM(cost_usd)"
        )
        params: list[object] = []
        if by == "day":  # each row counted between the bounds of its day
            days = self._days(cutoff, now)
            bounds = ", ".join("(?, ?, ?)" for _ in days)
            statement = (
                f"WITH days (label, first_at, end_at) AS (VALUES {bounds})"
                f" SELECT days.label, {totals} FROM usage"
                " JOIN days ON usage.at >= days.first_at AND usage.at < days.end_at"
                " WHERE usage.at >= ? GROUP BY days.label ORDER BY 1"
            )
            params = [value for day in days for value in day]
        else:
            group = {
                "session": "session_key",
                "agent": "agent",
                "person": "COALESCE(principal, '')",
                "model": "model",
            }[by]
            statement = (
                f"SELECT {group}, {totals} FROM usage WHERE at >= ? GROUP BY {group} ORDER BY 1"
            )

        def query(conn: Connection) -> list[UsageTotals]:
            rows = conn.execute(statement, (*params, cutoff))
            return [
                UsageTotals(str(k), int(n), int(i), int(o), int(c), int(e), _money(cost))
                for k, n, i, o, c, e, cost in rows
            ]

        return await self._db.run(query, durable=False)

    def _days(self, since: float, until: float) -> list[tuple[str, float, float]]:
        """The owner's days from the one of ``since`` to the one of ``until`` (Unix times):
        each its date (``2026-11-27``), start and end."""
        day = day_start(datetime.fromtimestamp(since, self._zone))
        days = []
        while day.timestamp() <= until:
            after = day + timedelta(days=1)
            days.append((day.strftime("%Y-%m-%d"), day.timestamp(), after.timestamp()))
            day = after
        return days

    async def spending(
        self, spenders: Sequence[Spender], *, since: float, until: float | None = None
    ) -> list[float]:
        """US dollars each of ``spenders`` spent from ``since`` until ``until`` (Unix times;
        ``None``: now), in one statement over the rows of that time."""
        if not spenders:
            return []
        sums: list[str] = []
        params: list[str] = []
        for spender in spenders:
            condition, values = spender.condition()
            sums.append(f"COALESCE(SUM(CASE WHEN {condition} THEN cost_usd END), 0)")
            params.extend(values)
        statement = (
            f"SELECT {', '.join(sums)} FROM usage WHERE at >= ? AND (? IS NULL OR at < ?)",
            (*params, since, until, until),
        )

        def parse(cursors: list[Cursor]) -> list[float]:
            return [float(value) for value in cursors[0].fetchone()]

        return await self._db.select([statement], parse)

    async def spent(self, since: float, *, principal: str | None = None) -> UsageTotals:
        """What was used since ``since`` (Unix time): by one person, or by everyone."""

        def query(conn: Connection) -> UsageTotals:
            row = conn.execute(
                "SELECT COUNT(DISTINCT turn_id), COALESCE(SUM(input_tokens), 0),"
                " COALESCE(SUM(output_tokens), 0), COALESCE(SUM(cache_read_tokens), 0),"
                " COALESCE(SUM(estimated_tokens), 0), SUM(cost_usd) FROM usage"
                " WHERE at >= ? AND (? IS NULL OR principal = ?)",
                (since, principal, principal),
            ).fetchone()
            turns, i, o, c, e, cost = row
            return UsageTotals(
                principal or "", int(turns), int(i), int(o), int(c), int(e), _money(cost)
            )

        return await self._db.run(query, durable=False)

    async def tokens_today(self, session_prefix: str = "") -> int:
        """Input + output tokens since the owner's midnight (for daily budgets)."""
        midnight = day_start(datetime.fromtimestamp(self._clock(), self._zone)).timestamp()

        def query(conn: Connection) -> int:
            (total,) = conn.execute(
                "SELECT COALESCE(SUM(input_tokens + output_tokens), 0) FROM usage"
                " WHERE at >= ? AND session_key LIKE ?",
                (midnight, session_prefix + "%"),
            ).fetchone()
            return int(total)

        return await self._db.run(query, durable=False)

    async def by_principal(
        self, principal: str, *, since: float, turns_since: float
    ) -> PersonUsage:
        """Tokens charged to one person since ``since`` (every purpose) and their turns since
        ``turns_since``."""

        charged = (
            "SELECT COALESCE(SUM(CASE WHEN at >= ? THEN input_tokens + output_tokens END), 0),"
            " COUNT(DISTINCT CASE WHEN at >= ? AND purpose = 'turn' THEN turn_id END)"
            " FROM usage WHERE principal = ? AND at >= ?",
            (since, turns_since, principal, min(since, turns_since)),
        )

        def parse(cursors: list[Cursor]) -> PersonUsage:
            tokens, turns = cursors[0].fetchone()
            return PersonUsage(int(tokens), int(turns))

        return await self._db.select([charged], parse)

    async def prune(self, before: float) -> int:
        """Forget usage recorded before ``before`` (keep at least the control center's days)."""
        return await delete_batched(self._db, "usage", "at < ?", [before])


def _money(value: float | None) -> float | None:
    return None if value is None else float(value)
