"""Where each memory entry came from: who, in which chat and turn, when, and whether the turn
had read outside content.

Memory itself stays in the workspace's Markdown files (agent/memory.py), which the owner may
edit by hand; this records, per agent, file and line (by a digest of its text), the origin of
each line a memory tool or a summary's memory flush wrote. A line written again keeps its
first origin; a line edited by hand has none (it is shown as such).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from gateway.store.engine.db import Database
from gateway.store.engine.sql import Connection


@dataclass(frozen=True, slots=True)
class Origin:
    person: str  # channel:sender id of whom the turn was for
    channel: str
    chat_id: str
    turn_id: str | None
    at: float
    outside: bool  # the turn had read outside content (a page, an email, a document)


def digest(text: str) -> str:
    return hashlib.sha256(text.strip().encode()).hexdigest()[:32]


class MemoryEntries:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def record(self, agent: str, path: str, entries: Sequence[str], origin: Origin) -> None:
        """``entries`` (lines of the memory file ``path``) came from ``origin``."""
        digests = sorted({digest(e) for e in entries if e.strip()})
        if not digests:
            return

        def insert(conn: Connection) -> None:
            conn.execute(
                "INSERT INTO memory_entries (agent, path, digest, person, channel, chat_id,"
                " turn_id, at, outside) VALUES "
                + ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?)"] * len(digests))
                + " ON CONFLICT (agent, path, digest) DO NOTHING",
                [
                    value
                    for d in digests
                    for value in (
                        agent,
                        path,
                        d,
                        origin.person,
                        origin.channel,
                        origin.chat_id,
                        origin.turn_id,
                        origin.at,
                        int(origin.outside),
                    )
                ],
            )

        await self._db.run(insert)

    async def origins(
        self, agent: str, entries: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], Origin]:
        """The origins known of ``entries`` ((path, line) each), by entry."""
        wanted = {(path, digest(line)): (path, line) for path, line in entries}
        if not wanted:
            return {}

        def query(conn: Connection) -> dict[tuple[str, str], Origin]:
            marks = ", ".join(["(?, ?)"] * len(wanted))
            rows = conn.execute(
                "SELECT path, digest, person, channel, chat_id, turn_id, at, outside"
                " FROM memory_entries WHERE agent = ? AND (path, digest) IN"
                f" (VALUES {marks})",
                (agent, *(value for key in wanted for value in key)),
            )
            return {
                wanted[(path, d)]: Origin(person, channel, chat, turn, float(at), bool(outside))
                for path, d, person, channel, chat, turn, at, outside in rows
            }

        return await self._db.run(query, durable=False)
