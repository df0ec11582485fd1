"""Conversation history per session, including the unfinished turn's checkpoints.

A running turn writes each model response and tool result as a *checkpoint* as soon as it
exists (a row with ``status = 'draft'``, its name from before): a resumed turn continues
from there. Committing the turn makes its checkpoints *final* history in the same
transaction that queues the answer. ``/new`` starts a new generation: older messages stay
on disk but leave the context. (A *draft* elsewhere is a streamed answer's platform message:
:mod:`gateway.store.drafts`.)
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gateway.store.engine.db import Database
from gateway.store.engine.sql import Connection, Cursor, Statement

Clock = Callable[[], float]


MessageRole = Literal["system", "user", "assistant", "tool"]  # a message's author


@dataclass(frozen=True, slots=True)
class SessionState:
    session_key: str
    generation: int = 0
    summary: str | None = None
    summary_upto: int = 0
    last_active: float | None = None
    model: str | None = None  # the model this chat chose with /model (None: the agent's)
    # the person's own words from the summarized part, kept verbatim beside the summary
    summary_quotes: str | None = None


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """One conversation as the control center lists it: when it was last active, how many
    messages its current conversation holds, and its latest words."""

    session_key: str
    last_active: float | None
    generation: int
    messages: int  # final messages of the current conversation (since the last /new)
    last_role: MessageRole | None
    last_text: str  # the newest user or assistant text ("" when there is none)
    last_at: float | None


@dataclass(frozen=True, slots=True)
class ShownMessage:
    """A final message of a conversation, as its transcript shows it."""

    id: int
    role: MessageRole
    body: dict[str, Any]
    turn_id: str | None
    generation: int  # conversations before a /new have a lower one
    at: float
    running: bool = False  # a checkpoint of the turn running now (not final yet)


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: int
    role: MessageRole
    body: dict[str, Any]
    tokens: int
    turn_id: str | None


# LIMIT of "every row" (SQLite's -1 is an error on PostgreSQL)
_NO_LIMIT = 1 << 62


# Between a user message as the person wrote it and the guidance the agent keeps after it
# for the model (agent.context.with_guidance); what people see and search stops there.
GUIDANCE_MARK = "\n\n[guidance for this request]\n"


def without_guidance(text: str) -> str:
    """A user message's text as the person wrote it (with its time stamp), without the
    guidance kept after it."""
    return text.split(GUIDANCE_MARK, 1)[0]


def searchable(content: Any) -> str | None:
    """The text of a message's ``content`` that full-text search indexes and a search shows:
    the text itself, or the JSON of structured content (parts); nothing when empty. Never
    the guidance kept after a user message (it is ours, not what anyone said)."""
    if content is None or content == "":
        return None
    if isinstance(content, str):
        return without_guidance(content)
    if isinstance(content, list):
        content = [
            {**part, "text": without_guidance(part["text"])}
            if isinstance(part, dict) and isinstance(part.get("text"), str)
            else part
            for part in content
        ]
    return json.dumps(content, ensure_ascii=False, separators=(",", ":"))


def shaped_by_outside(
    messages: Sequence[tuple[MessageRole, dict[str, Any]]], *, tainted: bool
) -> set[int]:
    """Which of a turn's messages (their roles and bodies, in order) are answers written
    after the turn read outside content, to be stored marked ``untrusted`` as the outside
    content itself is: every answer of a turn that read some (``tainted``: its taint may
    date from its start, a forward or a webhook's payload), and every answer after an
    outside message of it (a stopped turn's outcome does not say it read any). Recalled
    later, such an answer is outside content again (agent/tools/memory.py), so what it
    repeats of a page or of another person's words cannot pass for the owner's own."""
    marked: set[int] = set()
    after = tainted
    for number, (role, body) in enumerate(messages):
        after = after or bool(body.get("untrusted"))
        if role == "assistant" and after and not body.get("untrusted"):
            marked.add(number)
    return marked


@dataclass(frozen=True, slots=True)
class NewMessage:
    role: MessageRole
    body: dict[str, Any]
    tokens: int = 0


# the session's generation in the statement itself (a round trip fewer than reading it first)
CURRENT_GENERATION = "COALESCE((SELECT generation FROM sessions WHERE session_key = ?), 0)"


def _session_statement(session_key: str) -> Statement:
    return (
        "SELECT generation, summary, summary_upto, last_active, model, summary_quotes"
        " FROM sessions WHERE session_key = ?",
        (session_key,),
    )


def _session(conn: Connection, session_key: str) -> SessionState:
    return _session_state(session_key, conn.execute(*_session_statement(session_key)))


def _session_state(session_key: str, cursor: Cursor) -> SessionState:
    row = cursor.fetchone()
    if row is None:
        return SessionState(session_key)
    return SessionState(session_key, int(row[0]), row[1], int(row[2]), row[3], row[4], row[5])


def _rows(cursor: Iterable[tuple[int, MessageRole, str, int, str | None]]) -> list[StoredMessage]:
    return [
        StoredMessage(row_id, role, json.loads(body), tokens, turn_id)
        for row_id, role, body, tokens, turn_id in cursor
    ]


class History:
    def __init__(self, db: Database, *, clock: Clock = time.time) -> None:
        self._db = db
        self._clock = clock

    async def load(
        self, session_key: str, *, limit: int | None
    ) -> tuple[SessionState, list[StoredMessage]]:
        """The session's state and its newest ``limit`` final messages after the summary."""

        # The messages after the session's summary (found by the server), then the session:
        # one round trip on PostgreSQL. A summary committed between the two (each
        # statement sees its own snapshot) only narrows what the state returned admits,
        # so the messages it no longer admits are left out here.
        messages = (
            "SELECT id, role, body, tokens, turn_id, generation FROM messages"
            " WHERE session_key = ? AND status = 'final'"
            " AND generation = COALESCE((SELECT generation FROM sessions WHERE session_key = ?), 0)"
            " AND id > COALESCE((SELECT summary_upto FROM sessions WHERE session_key = ?), 0)"
            " ORDER BY id DESC LIMIT ?",
            (session_key, session_key, session_key, _NO_LIMIT if limit is None else limit),
        )

        def parse(cursors: list[Cursor]) -> tuple[SessionState, list[StoredMessage]]:
            newest, session = cursors
            state = _session_state(session_key, session)
            rows = [
                row[:5]
                for row in reversed(newest.fetchall())
                if row[5] == state.generation and row[0] > state.summary_upto
            ]
            return state, _rows(rows)

        return await self._db.select([messages, _session_statement(session_key)], parse)

    async def checkpoints(self, turn_id: str) -> list[StoredMessage]:
        def query(conn: Connection) -> list[StoredMessage]:
            return _rows(
                conn.execute(
                    "SELECT id, role, body, tokens, turn_id FROM messages"
                    " WHERE turn_id = ? AND status = 'draft' ORDER BY id",
                    (turn_id,),
                )
            )

        return await self._db.run(query, durable=False)

    async def add_checkpoints(
        self,
        session_key: str,
        turn_id: str,
        messages: Sequence[NewMessage],
        *,
        claim: Sequence[int] = (),
    ) -> list[int]:
        """Checkpoint a running turn. Not fsynced on its own: a power cut may lose the last
        checkpoints, and the turn then resumes from an earlier one (the tool ledger, written
        durably before any side effect, keeps those from being repeated).

        ``claim``: inbound rows (follow-ups the person sent meanwhile) that join the turn in
        the same transaction as the checkpoint that carries their words: either both are
        kept or neither, so a follow-up is answered once, by this turn or by the next."""
        now = self._clock()

        def insert(conn: Connection) -> list[int]:
            conn.executemany(
                "UPDATE inbound SET state = 'processing', turn_id = ?, updated_at = ?"
                " WHERE id = ? AND state = 'pending'",
                [(turn_id, now, record_id) for record_id in claim],
            )
            ids = []
            for msg in messages:
                cursor = conn.execute(
                    "INSERT INTO messages (session_key, generation, turn_id, status, role, body,"
                    f" tokens, created_at) VALUES (?, {CURRENT_GENERATION}, ?, 'draft', ?, ?, ?, ?)"
                    " RETURNING id",
                    (
                        session_key,
                        session_key,
                        turn_id,
                        msg.role,
                        json.dumps(msg.body, ensure_ascii=False),
                        msg.tokens,
                        now,
                    ),
                )
                ids.append(int(cursor.fetchone()[0]))
            return ids

        return await self._db.run(insert, durable=False)

    async def drop(self, message_ids: Sequence[int]) -> None:
        """Take messages out of the context for good (error cleanup)."""
        await self._db.run(
            lambda conn: conn.executemany(
                "UPDATE messages SET status = 'dropped' WHERE id = ?",
                [(message_id,) for message_id in message_ids],
            )
        )

    def finalize_statement(
        self,
        conn: Connection,
        session_key: str,
        turn_id: str,
        scope: str | None = None,
        *,
        tainted: bool = False,
    ) -> None:
        """The turn's checkpoints become history; its user and assistant text becomes
        searchable by words at once and is queued for its vectors (gateway.store.recall).
        ``scope``: whose conversation the session is (kept when ``None``). The answers of a
        turn that read outside content are marked so (:func:`shaped_by_outside`)."""
        now = self._clock()
        rows = conn.execute(
            "UPDATE messages SET status = 'final' WHERE turn_id = ? AND status = 'draft'"
            " RETURNING id, session_key, role, body",
            (turn_id,),
        ).fetchall()
        # RETURNING's order is not defined
        messages = [
            (row_id, key, role, json.loads(body)) for row_id, key, role, body in sorted(rows)
        ]
        marked = shaped_by_outside([(role, body) for _, _, role, body in messages], tainted=tainted)
        if marked:
            conn.executemany(
                "UPDATE messages SET body = ? WHERE id = ?",
                [
                    (json.dumps({**body, "untrusted": True}, ensure_ascii=False), row_id)
                    for number, (row_id, _, _, body) in enumerate(messages)
                    if number in marked
                ],
            )
        indexed = [
            (text, key, row_id)
            for row_id, key, role, body in messages
            if role in {"user", "assistant"} and (text := searchable(body.get("content")))
        ]
        _index(conn, indexed)
        conn.execute(
            "INSERT INTO sessions (session_key, last_active, scope) VALUES (?, ?, ?)"
            " ON CONFLICT (session_key) DO UPDATE SET last_active = excluded.last_active,"
            " scope = COALESCE(excluded.scope, sessions.scope)",
            (session_key, now, scope),
        )

    def append_final_statement(self, conn: Connection, session_key: str, msg: NewMessage) -> None:
        """Add a message straight to a session's history (e.g. a background task's result)."""
        cursor = conn.execute(
            "INSERT INTO messages (session_key, generation, turn_id, status, role, body, tokens,"
            f" created_at) VALUES (?, {CURRENT_GENERATION}, NULL, 'final', ?, ?, ?, ?)"
            " RETURNING id",
            (
                session_key,
                session_key,
                msg.role,
                json.dumps(msg.body, ensure_ascii=False),
                msg.tokens,
                self._clock(),
            ),
        )
        (message_id,) = cursor.fetchone()
        content = searchable(msg.body.get("content"))
        if content:
            _index(conn, [(content, session_key, message_id)])

    async def new_generation(self, session_key: str) -> int:
        """Start a fresh conversation (``/new``); the old one stays on disk."""
        return await self._db.run(lambda conn: self.new_generation_statement(conn, session_key))

    def new_generation_statement(self, conn: Connection, session_key: str) -> int:
        conn.execute(
            "INSERT INTO sessions (session_key, generation, last_active) VALUES (?, 1, ?)"
            " ON CONFLICT (session_key) DO UPDATE SET generation = sessions.generation + 1,"
            " summary = NULL, summary_upto = 0, summary_quotes = NULL,"
            " last_active = excluded.last_active",
            (session_key, self._clock()),
        )
        return _session(conn, session_key).generation

    async def continue_from(
        self, source: str, target: str, *, keep: int, written_on: str | None = None
    ) -> int:
        """Let the conversation ``target`` go on where ``source`` is (its summary and its
        newest ``keep`` messages after it), if ``target`` has nothing in it yet; how many
        messages it took. ``source`` keeps its own; the copies are not indexed again, so a
        search finds each message once (in ``source``). ``written_on``: the channel of
        ``source``'s chat, which the copied messages' stamps name (``[09:14 on telegram]``,
        as in a conversation across channels)."""

        def carry(conn: Connection) -> int:
            mine = _session(conn, target)
            begun = conn.execute(
                "SELECT 1 FROM messages WHERE session_key = ? AND generation = ?"
                " AND status <> 'dropped' LIMIT 1",
                (target, mine.generation),
            ).fetchone()
            if begun is not None or mine.summary:
                return 0
            theirs = _session(conn, source)
            rows = conn.execute(
                "SELECT role, body, tokens, created_at FROM messages WHERE session_key = ?"
                " AND generation = ? AND status = 'final' AND id > ? ORDER BY id DESC LIMIT ?",
                (source, theirs.generation, theirs.summary_upto, keep),
            ).fetchall()
            if not rows and not theirs.summary:
                return 0
            conn.execute(
                "INSERT INTO sessions (session_key, generation, summary, summary_upto,"
                " summary_quotes, last_active) VALUES (?, ?, ?, 0, ?, ?)"
                " ON CONFLICT (session_key) DO UPDATE SET summary = excluded.summary,"
                " summary_upto = 0, summary_quotes = excluded.summary_quotes,"
                " last_active = excluded.last_active",
                (
                    target,
                    mine.generation,
                    theirs.summary,
                    theirs.summary_quotes,
                    theirs.last_active,
                ),
            )
            conn.executemany(
                "INSERT INTO messages (session_key, generation, turn_id, status, role, body,"
                " tokens, created_at) VALUES (?, ?, NULL, 'final', ?, ?, ?, ?)",
                [
                    (target, mine.generation, role, _written_on(role, body, written_on), *rest)
                    for role, body, *rest in reversed(rows)
                ],
            )
            return len(rows)

        return await self._db.run(carry)

    async def set_model(self, session_key: str, model: str | None) -> None:
        """This chat's model from now on (``None``: back to the agent's)."""
        await self._db.run(
            lambda conn: conn.execute(
                "INSERT INTO sessions (session_key, model) VALUES (?, ?)"
                " ON CONFLICT (session_key) DO UPDATE SET model = excluded.model",
                (session_key, model),
            )
        )

    async def set_summary(
        self, session_key: str, summary: str, upto_id: int, quotes: str | None = None
    ) -> None:
        """The summary of the session's messages up to ``upto_id``, and the person's own
        words from them kept beside it (``quotes``)."""
        await self._db.run(
            lambda conn: conn.execute(
                "INSERT INTO sessions (session_key, summary, summary_upto, summary_quotes)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (session_key) DO UPDATE SET"
                " summary = excluded.summary, summary_upto = excluded.summary_upto,"
                " summary_quotes = excluded.summary_quotes",
                (session_key, summary, upto_id, quotes),
            )
        )

    async def said(self, session_key: str, upto_id: int) -> list[tuple[float, str]]:
        """What the person wrote in the session's current conversation up to ``upto_id``
        ((time, text) each, oldest first): kept word for word beside a summary."""

        def query(conn: Connection) -> list[tuple[float, str]]:
            rows = conn.execute(
                "SELECT created_at, body FROM messages WHERE session_key = ? AND status = 'final'"
                f" AND role = 'user' AND generation = {CURRENT_GENERATION} AND id <= ?"
                " ORDER BY id",
                (session_key, session_key, upto_id),
            )
            return [
                (float(at), text)
                for at, body in rows
                if (text := searchable(json.loads(body).get("content")))
            ]

        return await self._db.run(query, durable=False)

    async def set_tokens(self, counts: Sequence[tuple[int, int]]) -> None:
        """Remember exact token counts of messages: (message id, tokens)."""
        await self._db.run(
            lambda conn: conn.executemany(
                "UPDATE messages SET tokens = ? WHERE id = ?", [(t, i) for i, t in counts]
            )
        )

    async def context_tokens(self, session_key: str) -> int:
        """About how many tokens the conversation's history takes (counted where compaction
        counted them, else a quarter of its characters)."""

        def query(conn: Connection) -> int:
            state = _session(conn, session_key)
            (total,) = conn.execute(
                "SELECT COALESCE(SUM(CASE WHEN tokens > 0 THEN tokens ELSE LENGTH(body) / 4 END), 0)"
                " FROM messages"
                " WHERE session_key = ? AND generation = ? AND status = 'final'",
                (session_key, state.generation),
            ).fetchone()
            return int(total)

        return await self._db.run(query, durable=False)

    async def sessions(self, *, limit: int) -> list[SessionSummary]:
        """The ``limit`` most recently active conversations, newest first; one whose first
        turn runs (or waits for an approval) counts from its first checkpoint, and its
        latest words may be the running turn's."""

        def query(conn: Connection) -> list[SessionSummary]:
            rows = conn.execute(
                "WITH keys AS ("
                " SELECT session_key, last_active, generation FROM sessions"
                " UNION ALL"
                " SELECT m.session_key, MAX(m.created_at), 0 FROM messages m"
                " WHERE m.status = 'draft' AND NOT EXISTS"
                " (SELECT 1 FROM sessions s WHERE s.session_key = m.session_key)"
                " GROUP BY m.session_key)"
                " SELECT k.session_key, k.last_active, k.generation,"
                " (SELECT COUNT(*) FROM messages m WHERE m.session_key = k.session_key"
                "  AND m.generation = k.generation AND m.status = 'final'),"
                " (SELECT MAX(m.id) FROM messages m WHERE m.session_key = k.session_key"
                "  AND m.status IN ('final', 'draft') AND m.role IN ('user', 'assistant'))"
                " FROM keys k ORDER BY COALESCE(k.last_active, 0) DESC, k.session_key LIMIT ?",
                (limit,),
            ).fetchall()
            newest = [row[4] for row in rows if row[4] is not None]
            last: dict[int, tuple[MessageRole, str, float]] = {}
            if newest:
                marks = ",".join("?" for _ in newest)
                for row_id, role, body, at in conn.execute(
                    f"SELECT id, role, body, created_at FROM messages WHERE id IN ({marks})",
                    tuple(newest),
                ):
                    text = searchable(json.loads(body).get("content")) or ""
                    last[int(row_id)] = (role, text, float(at))
            summaries = []
            for key, active, generation, count, newest_id in rows:
                role, text, at = last.get(newest_id, (None, "", None))
                summaries.append(
                    SessionSummary(key, active, int(generation), int(count), role, text, at)
                )
            return summaries

        return await self._db.run(query, durable=False)

    async def last_activity(self) -> float | None:
        """When any conversation was last active (the control center refreshes on a change)."""

        def query(conn: Connection) -> float | None:
            (at,) = conn.execute("SELECT MAX(last_active) FROM sessions").fetchone()
            return None if at is None else float(at)

        return await self._db.run(query, durable=False)

    async def session_keys(self, *, limit: int) -> list[str]:
        """The ``limit`` most recently active sessions' keys (what a search covers)."""

        def query(conn: Connection) -> list[str]:
            rows = conn.execute(
                "SELECT session_key FROM sessions ORDER BY COALESCE(last_active, 0) DESC LIMIT ?",
                (limit,),
            )
            return [str(key) for (key,) in rows]

        return await self._db.run(query, durable=False)

    async def transcript(self, session_key: str, *, limit: int) -> list[ShownMessage]:
        """The newest ``limit`` messages of the session, of every conversation it had
        (``/new`` starts another) and the running turn's checkpoints, oldest first: what the
        control center shows."""

        def query(conn: Connection) -> list[ShownMessage]:
            rows = conn.execute(
                "SELECT id, role, body, turn_id, generation, created_at, status FROM messages"
                " WHERE session_key = ? AND status IN ('final', 'draft') ORDER BY id DESC LIMIT ?",
                (session_key, limit),
            ).fetchall()
            return [
                ShownMessage(
                    int(i), role, json.loads(body), turn, int(generation), float(at), s == "draft"
                )
                for i, role, body, turn, generation, at, s in reversed(rows)
            ]

        return await self._db.run(query, durable=False)

    async def known(self, session_key: str) -> bool:
        """Whether the session was ever used (a message, or a start afresh)."""

        def query(conn: Connection) -> bool:
            row = conn.execute(
                "SELECT 1 FROM sessions WHERE session_key = ? UNION ALL"
                " SELECT 1 FROM messages WHERE session_key = ? LIMIT 1",
                (session_key, session_key),
            ).fetchone()
            return row is not None

        return await self._db.run(query, durable=False)

    async def message_count(self, session_key: str) -> int:
        def query(conn: Connection) -> int:
            state = _session(conn, session_key)
            (count,) = conn.execute(
                "SELECT COUNT(*) FROM messages WHERE session_key = ? AND generation = ?"
                " AND status = 'final'",
                (session_key, state.generation),
            ).fetchone()
            return int(count)

        return await self._db.run(query, durable=False)


_STAMP = re.compile(r"\[(\d\d:\d\d)\] ")  # "[09:14] ": when, in one chat's conversation


def _written_on(role: str, body: str, channel: str | None) -> str:
    """A user message's stored ``body`` with its stamp naming ``channel`` ("[09:14] hi"
    becomes "[09:14 on telegram] hi"; a message without a time, "[on telegram] hi")."""
    if channel is None or role != "user":
        return body
    message = json.loads(body)
    content = message.get("content")
    part = content[0] if isinstance(content, list) and content else None
    text = part.get("text") if isinstance(part, dict) else content
    if not isinstance(text, str) or text.startswith("[on "):
        return body
    stamp = _STAMP.match(text)
    if stamp is not None:
        text = f"[{stamp.group(1)} on {channel}] {text[stamp.end() :]}"
    elif not re.match(r"\[\d\d:\d\d on ", text):
        text = f"[on {channel}] {text}"
    if isinstance(part, dict):
        message["content"] = [{**part, "text": text}, *content[1:]]
    else:
        message["content"] = text
    return json.dumps(message, ensure_ascii=False)


def _index(conn: Connection, indexed: Sequence[tuple[str, str, int]]) -> None:
    """Make messages searchable: by their words at once, by their meaning once the indexer
    has stored their vectors ((text, session key, message id) each). One statement per
    table for all of them (an executemany is one per row on PostgreSQL)."""
    if not indexed:
        return
    conn.execute(
        "INSERT INTO messages_fts (content, session_key, message_id) VALUES "
        + ", ".join(["(?, ?, ?)"] * len(indexed)),
        [value for row in indexed for value in row],
    )
    conn.execute(
        "INSERT INTO recall_queue (message_id) VALUES "
        + ", ".join(["(?)"] * len(indexed))
        + " ON CONFLICT (message_id) DO NOTHING",
        [message_id for _, _, message_id in indexed],
    )
