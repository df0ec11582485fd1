"""The API's recent requests without an idempotency key, for the SDKs' retries of them
(channels/api/channel.py).

The official OpenAI SDKs send a request again on their own (a timeout, a lost connection,
a 5xx) with the same body and no key of the client's. Such a retry is the request it
repeats: it must get that request's answer, never start a second turn. What matches a
retry to its first try (the session and the digest of the body, for a short window) is
kept here rather than in the process, because what most often cuts a request's connection
is the gateway restarting, after which the retry comes to a process that never saw the
first try. Rows expire with the window: each write forgets the expired ones, so the table
holds at most the requests of one window.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gateway.store.engine.db import Database
from gateway.store.engine.retention import delete_batched
from gateway.store.engine.sql import Connection


class ApiRequests:
    def __init__(self, db: Database, *, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self._clock = clock

    async def remember(self, session_key: str, body: str, message_id: str, *, keep: float) -> None:
        """The request of ``session_key`` whose body has the digest ``body`` was journaled
        as ``message_id``: a retry of it within ``keep`` seconds is that message (a later
        one with the same body takes its place).

        Not fsynced on its own: the journal's durable insert of the message comes next and
        carries it to the disk; without that insert the request was never taken, and its
        retry, journaled under the remembered id, is."""
        now = self._clock()

        def write(conn: Connection) -> None:
            conn.execute("DELETE FROM api_requests WHERE expires_at < ?", (now,))
            conn.execute(
                "INSERT INTO api_requests (session_key, body, message_id, expires_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (session_key, body) DO UPDATE"
                " SET message_id = excluded.message_id, expires_at = excluded.expires_at",
                (session_key, body, message_id, now + keep),
            )

        await self._db.run(write, durable=False)

    async def find(self, session_key: str, body: str) -> str | None:
        """The message id of the session's request with this body, unless it expired."""
        now = self._clock()

        def query(conn: Connection) -> str | None:
            row = conn.execute(
                "SELECT message_id FROM api_requests"
                " WHERE session_key = ? AND body = ? AND expires_at >= ?",
                (session_key, body, now),
            ).fetchone()
            return None if row is None else str(row[0])

        return await self._db.run(query, durable=False)

    async def prune(self, now: float) -> int:
        """Forget the requests whose window has passed (also when no request came since)."""
        return await delete_batched(self._db, "api_requests", "expires_at < ?", [now])
