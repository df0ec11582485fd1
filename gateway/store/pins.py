"""Goals and notes (AI Legion's pinned messages), and agent-to-agent conversations.

Goals and notes are kept per agent and per scope (whose they are), and are pinned into the
context of every turn from this state, never stored as history.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.core.messages import ChatRef
from gateway.store.engine.db import Database
from gateway.store.engine.sql import Connection, Cursor

Clock = Callable[[], float]
MAX_NOTE_CHARS = 4_000


@dataclass(frozen=True, slots=True)
class Goal:
    id: int
    text: str
    done: bool


class Pins:
    def __init__(self, db: Database, *, clock: Clock = time.time) -> None:
        self._db = db
        self._clock = clock

    async def add_goal(self, agent: str, scope: str, text: str) -> int:
        def insert(conn: Connection) -> int:
            cursor = conn.execute(
                "INSERT INTO goals (agent, scope, text, created_at) VALUES (?, ?, ?, ?)"
                " RETURNING id",
                (agent, scope, text, self._clock()),
            )
            return int(cursor.fetchone()[0])

        return await self._db.run(insert)

    async def complete_goal(self, agent: str, scope: str, goal_id: int) -> bool:
        def update(conn: Connection) -> bool:
            cursor = conn.execute(
                "UPDATE goals SET done = 1, completed_at = ? WHERE id = ? AND agent = ? AND scope = ?"
                " AND done = 0",
                (self._clock(), goal_id, agent, scope),
            )
            return cursor.rowcount > 0

        return await self._db.run(update)

    async def goals(self, agent: str, scope: str, *, include_done: bool = False) -> list[Goal]:
        def query(conn: Connection) -> list[Goal]:
            rows = conn.execute(
                "SELECT id, text, done FROM goals WHERE agent = ? AND scope = ?"
                + ("" if include_done else " AND done = 0")
                + " ORDER BY id",
                (agent, scope),
            )
            return [Goal(int(i), t, bool(d)) for i, t, d in rows]

        return await self._db.run(query, durable=False)

    async def write_note(self, agent: str, scope: str, title: str, content: str) -> None:
        await self._db.run(
            lambda conn: conn.execute(
                "INSERT INTO notes (agent, scope, title, content, updated_at) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (agent, scope, title) DO UPDATE SET content = excluded.content,"
                " updated_at = excluded.updated_at",
                (agent, scope, title, content[:MAX_NOTE_CHARS], self._clock()),
            )
        )

    async def note(self, agent: str, scope: str, title: str) -> str | None:
        def query(conn: Connection) -> str | None:
            row = conn.execute(
                "SELECT content FROM notes WHERE agent = ? AND scope = ? AND title = ?",
                (agent, scope, title),
            ).fetchone()
            return None if row is None else str(row[0])

        return await self._db.run(query, durable=False)

    async def delete_note(self, agent: str, scope: str, title: str) -> bool:
        def delete(conn: Connection) -> bool:
            cursor = conn.execute(
                "DELETE FROM notes WHERE agent = ? AND scope = ? AND title = ?",
                (agent, scope, title),
            )
            return cursor.rowcount > 0

        return await self._db.run(delete)

    async def note_titles(self, agent: str, scope: str) -> list[str]:
        def query(conn: Connection) -> list[str]:
            rows = conn.execute(
                "SELECT title FROM notes WHERE agent = ? AND scope = ? ORDER BY title",
                (agent, scope),
            )
            return [str(title) for (title,) in rows]

        return await self._db.run(query, durable=False)

    async def pinned(self, agent: str, scope: str) -> str:
        """The block pinned into every turn: open goals and note titles (empty if none)."""

        both = (  # one statement for both: a round trip on PostgreSQL
            "SELECT kind, id, text FROM ("
            " SELECT 0 AS kind, id, text FROM goals WHERE agent = ? AND scope = ? AND done = 0"
            " UNION ALL SELECT 1, 0, title FROM notes WHERE agent = ? AND scope = ?"
            ") pinned ORDER BY kind, id, text",
            (agent, scope, agent, scope),
        )

        def parse(cursors: list[Cursor]) -> str:
            rows = cursors[0].fetchall()
            goals = [(goal_id, text) for kind, goal_id, text in rows if kind == 0]
            titles = [text for kind, _, text in rows if kind == 1]
            parts = []
            if goals:
                parts.append("Current goals:\n" + "\n".join(f"- [{i}] {t}" for i, t in goals))
            if titles:
                parts.append("Notes (read with notes view): " + ", ".join(titles))
            return "\n".join(parts)

        return await self._db.select([both], parse)


@dataclass(frozen=True, slots=True)
class AgentConversation:
    id: str
    origin: ChatRef
    origin_agent: str
    principal: dict[str, Any]
    hops: int
    # The words of the person who started the exchange (the only ones that may authorise a
    # side effect in it) and whether any turn in it has read outside content.
    authorised_by: tuple[str, ...] = ()
    tainted: bool = False


class AgentConversations:
    """Who started an agent-to-agent exchange, and how many messages it has used."""

    def __init__(self, db: Database, *, clock: Clock = time.time) -> None:
        self._db = db
        self._clock = clock

    async def start(
        self,
        conversation_id: str,
        origin: ChatRef,
        origin_agent: str,
        principal: dict[str, Any],
        *,
        authorised_by: tuple[str, ...] = (),
        tainted: bool = False,
    ) -> None:
        await self._db.run(
            lambda conn: conn.execute(
                "INSERT INTO agent_conversations (id, origin_channel, origin_chat,"
                " origin_thread, origin_agent, principal, created_at, authorised_by, tainted)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (
                    conversation_id,
                    origin.channel,
                    origin.chat_id,
                    origin.thread_id,
                    origin_agent,
                    json.dumps(principal),
                    self._clock(),
                    json.dumps(list(authorised_by)),
                    int(tainted),
                ),
            )
        )

    async def taint(self, conversation_id: str) -> None:
        """A turn in the exchange read outside content: every later turn in it is tainted."""
        await self._db.run(
            lambda conn: conn.execute(
                "UPDATE agent_conversations SET tainted = 1 WHERE id = ?", (conversation_id,)
            )
        )

    async def get(self, conversation_id: str) -> AgentConversation | None:
        def query(conn: Connection) -> AgentConversation | None:
            row = conn.execute(
                "SELECT id, origin_channel, origin_chat, origin_thread, origin_agent, principal,"
                " hops, authorised_by, tainted FROM agent_conversations WHERE id = ?",
                (conversation_id,),
            ).fetchone()
            if row is None:
                return None
            cid, channel, chat, thread, agent, principal, hops, authorised_by, tainted = row
            return AgentConversation(
                cid,
                ChatRef(channel, chat, thread),
                agent,
                json.loads(principal),
                int(hops),
                tuple(json.loads(authorised_by)),
                bool(tainted),
            )

        return await self._db.run(query, durable=False)

    async def hop(self, conversation_id: str) -> int:
        """Count one more message; returns the new count."""

        def update(conn: Connection) -> int:
            conn.execute(
                "UPDATE agent_conversations SET hops = hops + 1 WHERE id = ?", (conversation_id,)
            )
            row = conn.execute(
                "SELECT hops FROM agent_conversations WHERE id = ?", (conversation_id,)
            ).fetchone()
            return 0 if row is None else int(row[0])

        return await self._db.run(update)
