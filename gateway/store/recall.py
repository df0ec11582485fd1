"""Past conversations found again: whose each one is, their words, and their vectors.

A turn's commit makes its user and assistant text searchable (``messages_fts``, written by
:meth:`History.finalize_statement`) and, in the same transaction, records whose
conversation the session is (``sessions.scope``, from ``agent/memory.py:recall_scope``), who
spoke in a group (``scope_members``) and queues the messages for their vectors
(``recall_queue``). The vectors are made later, off the turn's path, by the indexer
(``agent/recall/indexer.py``): each batch stores its vectors and takes its messages off the
queue in one transaction, so a crash at any instant leaves every message either queued or
stored, once (``recall_vectors.message_id`` is unique).

Vectors are plain bytes (float32) on both engines: the search compares them in the process,
over a copy kept in memory and brought up to date by ``seq`` (the order they were stored
in), so neither ``sqlite-vec`` nor ``pgvector`` is needed and a cluster's nodes share them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gateway.store.engine.db import Database
from gateway.store.engine.sql import HIT_END, HIT_START, Connection
from gateway.store.history import MessageRole, searchable

Clock = Callable[[], float]

MODEL_KEY = "recall.model"  # kv: the model whose vectors recall_vectors holds ("" none)


@dataclass(frozen=True, slots=True)
class Said:
    """One message of a past conversation: who wrote it (the person or the assistant),
    where (its session and that session's scope) and when."""

    message_id: int
    session_key: str
    scope: str | None
    role: MessageRole
    at: float
    text: str
    sender: str = ""  # who wrote a person's message ("channel:sender id"; "": not recorded)
    # it carried others' words (a forward, a quote, a document, the group's messages), or an
    # answer written after its turn read outside content (gateway.store.history)
    outside: bool = False
    # the tools its turn called, for an answer (what it may have repeated: a search's hits)
    calls: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class KeywordHit:
    message_id: int
    marked: str  # the words around the matches, each match between HIT_START and HIT_END

    @property
    def snippet(self) -> str:
        """The snippet as the model reads it: the matching words in ``[brackets]``."""
        return self.marked.replace(HIT_START, "[").replace(HIT_END, "]")

    def pieces(self) -> list[tuple[str, bool]]:
        """The snippet in order, each piece with whether it is a matching word (the control
        center marks those; a word in brackets the person wrote is not one)."""
        pieces: list[tuple[str, bool]] = []
        for number, outside in enumerate(self.marked.split(HIT_START)):
            hit, _, rest = outside.rpartition(HIT_END) if number else ("", "", outside)
            pieces += [(hit.replace(HIT_END, ""), True), (rest, False)]
        return [(text, hit) for text, hit in pieces if text]


@dataclass(frozen=True, slots=True)
class StoredVector:
    seq: int
    message_id: int
    session_key: str
    at: float
    vector: bytes


class Recall:
    def __init__(self, db: Database, *, clock: Clock = time.time) -> None:
        self._db = db
        self._clock = clock

    # -- at the commit ----------------------------------------------------------------------

    def member_statement(self, conn: Connection, scope: str, person: str) -> None:
        """``person`` spoke in the group whose scope is ``scope``: its conversations are
        theirs to search too."""
        conn.execute(
            "INSERT INTO scope_members (scope, person, first_at) VALUES (?, ?, ?)"
            " ON CONFLICT (person, scope) DO NOTHING",
            (scope, person, self._clock()),
        )

    async def follow(self, old: str, new: str, *, old_person: str, new_person: str) -> int:
        """A person's past conversations are another's now (a link made one person of two):
        every agent's sessions of scope ``<agent>|old`` become ``<agent>|new``, and the
        groups ``old_person`` spoke in are ``new_person``'s to search. How many sessions."""

        def move(conn: Connection) -> int:
            ending = "|" + old
            rows = conn.execute("SELECT DISTINCT scope FROM sessions WHERE scope IS NOT NULL")
            moved = 0
            for scope in [str(s) for (s,) in rows.fetchall() if str(s).endswith(ending)]:
                agent = scope[: -len(ending)]
                moved += conn.execute(
                    "UPDATE sessions SET scope = ? WHERE scope = ?", (f"{agent}|{new}", scope)
                ).rowcount
            conn.execute(
                "INSERT INTO scope_members (scope, person, first_at)"
                " SELECT scope, ?, first_at FROM scope_members WHERE person = ?"
                " ON CONFLICT (person, scope) DO NOTHING",
                (new_person, old_person),
            )
            conn.execute("DELETE FROM scope_members WHERE person = ?", (old_person,))
            return moved

        return await self._db.run(move)

    # -- whose conversations a search may see ------------------------------------------------

    async def sessions(
        self, scopes: Sequence[str], *, prefix: str | None = None, also: str | None = None
    ) -> dict[str, str | None]:
        """The sessions (and their scopes) of ``scopes``, every session whose scope starts
        with ``prefix`` (an owner searching everything), and the session ``also`` whatever
        its scope (the current chat: its history from before scopes were recorded)."""

        def query(conn: Connection) -> dict[str, str | None]:
            found: dict[str, str | None] = {}
            if scopes:
                marks = ",".join("?" for _ in scopes)
                rows = conn.execute(
                    f"SELECT session_key, scope FROM sessions WHERE scope IN ({marks})",
                    tuple(scopes),
                )
                found.update(rows)
            if prefix is not None:
                rows = conn.execute(
                    "SELECT session_key, scope FROM sessions WHERE substr(scope, 1, ?) = ?",
                    (len(prefix), prefix),
                )
                found.update(rows)
            if also is not None and also not in found:
                row = conn.execute(
                    "SELECT scope FROM sessions WHERE session_key = ?", (also,)
                ).fetchone()
                found[also] = None if row is None else row[0]
            return found

        return await self._db.run(query, durable=False)

    async def member_scopes(self, person: str, prefix: str) -> list[str]:
        """The group scopes (of one agent: ``prefix``) where ``person`` spoke."""

        def query(conn: Connection) -> list[str]:
            rows = conn.execute(
                "SELECT scope FROM scope_members WHERE person = ? AND substr(scope, 1, ?) = ?",
                (person, len(prefix), prefix),
            )
            return [scope for (scope,) in rows]

        return await self._db.run(query, durable=False)

    # -- by words -------------------------------------------------------------------------------

    async def keyword(
        self, session_keys: Sequence[str], query: str, *, limit: int
    ) -> list[KeywordHit]:
        """Full-text search over the final messages of ``session_keys`` (all generations),
        best first."""
        if not session_keys:
            return []
        dialect = self._db.dialect

        def run(conn: Connection) -> list[KeywordHit]:
            rows = conn.execute(
                dialect.search_statement(len(session_keys)),
                (dialect.search_query(query), *session_keys, limit),
            )
            return [KeywordHit(int(message_id), snippet) for message_id, snippet in rows]

        return await self._db.run(run, durable=False)

    async def messages(self, message_ids: Sequence[int]) -> dict[int, Said]:
        """The messages of ``message_ids`` (those that exist), with their session's scope,
        and for an answer the tools its turn called."""
        if not message_ids:
            return {}

        def query(conn: Connection) -> dict[int, Said]:
            marks = ",".join("?" for _ in message_ids)
            rows = conn.execute(
                "SELECT m.id, m.session_key, s.scope, m.role, m.created_at, m.body, m.turn_id"
                " FROM messages m LEFT JOIN sessions s ON s.session_key = m.session_key"
                f" WHERE m.id IN ({marks})",
                tuple(message_ids),
            ).fetchall()
            answered = sorted(
                {turn for _, _, _, role, _, _, turn in rows if role == "assistant" and turn}
            )
            calls = _calls(conn, answered)
            found = {}
            for row_id, key, scope, role, at, body, turn in rows:
                said = json.loads(body)
                found[int(row_id)] = Said(
                    int(row_id),
                    key,
                    scope,
                    role,
                    float(at),
                    searchable(said.get("content")) or "",
                    str(said.get("sender") or ""),
                    bool(said.get("untrusted")),
                    calls.get(turn, frozenset()) if role == "assistant" else frozenset(),
                )
            return found

        return await self._db.run(query, durable=False)

    # -- the indexer's queue ----------------------------------------------------------------

    async def queued(self, limit: int) -> list[Said]:
        """The oldest messages waiting for their vectors."""

        def query(conn: Connection) -> list[Said]:
            rows = conn.execute(
                "SELECT q.message_id, m.session_key, m.role, m.created_at, m.body"
                " FROM recall_queue q JOIN messages m ON m.id = q.message_id"
                " ORDER BY q.message_id LIMIT ?",
                (limit,),
            )
            return [
                Said(int(row_id), key, None, role, float(at), _text(body))
                for row_id, key, role, at, body in rows
            ]

        return await self._db.run(query, durable=False)

    async def store_vectors(
        self, model: str, vectors: Sequence[tuple[Said, bytes]], done: Sequence[int]
    ) -> None:
        """In one transaction: the vectors stored (a message's first vector stays), and the
        messages of ``done`` taken off the queue."""

        def store(conn: Connection) -> None:
            if vectors:
                conn.execute(
                    "INSERT INTO recall_vectors"
                    " (message_id, session_key, created_at, model, vector) VALUES "
                    + ", ".join(["(?, ?, ?, ?, ?)"] * len(vectors))
                    + " ON CONFLICT (message_id) DO NOTHING",
                    [
                        value
                        for said, vector in vectors
                        for value in (said.message_id, said.session_key, said.at, model, vector)
                    ],
                )
            if done:
                marks = ",".join("?" for _ in done)
                conn.execute(f"DELETE FROM recall_queue WHERE message_id IN ({marks})", done)

        await self._db.run(store, durable=False)

    async def use_model(self, model: str) -> bool:
        """Make ``model`` the one whose vectors are kept ("" for none): when it is another
        than before, the other model's vectors go and every searchable message is queued
        again (also the history from before recall existed). Whether it changed."""

        def switch(conn: Connection) -> bool:
            row = conn.execute("SELECT value FROM kv WHERE key = ?", (MODEL_KEY,)).fetchone()
            if row is not None and json.loads(row[0]) == model:
                return False
            conn.execute("DELETE FROM recall_vectors WHERE model <> ?", (model,))
            conn.execute(
                "INSERT INTO recall_queue (message_id) SELECT f.message_id FROM messages_fts f"
                " WHERE NOT EXISTS (SELECT 1 FROM recall_vectors v"
                " WHERE v.message_id = f.message_id) ON CONFLICT (message_id) DO NOTHING"
            )
            conn.execute(
                "INSERT INTO kv (key, value, updated_at) VALUES (?, ?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value,"
                " updated_at = excluded.updated_at",
                (MODEL_KEY, json.dumps(model), self._clock()),
            )
            return True

        return await self._db.run(switch)

    async def vectors_after(self, seq: int, model: str, limit: int) -> list[StoredVector]:
        """Vectors of ``model`` stored after ``seq``, in the order they were stored."""

        def query(conn: Connection) -> list[StoredVector]:
            rows = conn.execute(
                "SELECT seq, message_id, session_key, created_at, vector FROM recall_vectors"
                " WHERE seq > ? AND model = ? ORDER BY seq LIMIT ?",
                (seq, model, limit),
            )
            return [
                StoredVector(int(s), int(m), key, float(at), bytes(vector))
                for s, m, key, at, vector in rows
            ]

        return await self._db.run(query, durable=False)

    async def backlog(self) -> int:
        """How many messages wait for their vectors."""

        def query(conn: Connection) -> int:
            (count,) = conn.execute("SELECT COUNT(*) FROM recall_queue").fetchone()
            return int(count)

        return await self._db.run(query, durable=False)


def _calls(conn: Connection, turns: Sequence[str]) -> dict[str, frozenset[str]]:
    """The names of the tools each of ``turns`` called (in its final messages)."""
    if not turns:
        return {}
    marks = ",".join("?" for _ in turns)
    rows = conn.execute(
        "SELECT turn_id, body FROM messages WHERE role = 'assistant' AND status = 'final'"
        f" AND turn_id IN ({marks})",
        tuple(turns),
    )
    called: dict[str, set[str]] = {}
    for turn, body in rows:
        names = {str(c.get("name")) for c in json.loads(body).get("tool_calls", ())}
        called.setdefault(str(turn), set()).update(names)
    return {turn: frozenset(names) for turn, names in called.items()}


def _text(body: str) -> str:
    return searchable(json.loads(body).get("content")) or ""
