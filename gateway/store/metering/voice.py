"""Seconds of speech transcribed for each person each day: the ``[voice]`` allowance.

A row per person (``channel:sender id``) and day (the gateway's UTC date); each voice note
adds its length when it is transcribed. Rows older than the usage retention are pruned.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gateway.store.engine.db import Database
from gateway.store.engine.retention import delete_batched
from gateway.store.engine.sql import Connection


class VoiceMinutes:
    def __init__(self, db: Database, *, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self._clock = clock

    async def used(self, person: str, day: str) -> float:
        """Seconds transcribed for ``person`` on ``day`` (``YYYY-MM-DD``)."""

        def query(conn: Connection) -> float:
            row = conn.execute(
                "SELECT seconds FROM voice_minutes WHERE person = ? AND day = ?", (person, day)
            ).fetchone()
            return 0.0 if row is None else float(row[0])

        return await self._db.run(query)

    async def add(self, person: str, day: str, seconds: float) -> None:
        now = self._clock()
        await self._db.run(
            lambda conn: conn.execute(
                "INSERT INTO voice_minutes (person, day, seconds, updated_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (person, day) DO UPDATE SET"
                " seconds = voice_minutes.seconds + excluded.seconds,"
                " updated_at = excluded.updated_at",
                (person, day, seconds, now),
            )
        )

    async def prune(self, before: float) -> int:
        return await delete_batched(self._db, "voice_minutes", "updated_at < ?", [before])
