"""Each person's own time zone, name and usage footer, the chats the bot knows by name,
and where people sent to.

``people``: a zone a person set by asking (the ``timezone`` tool, after they confirmed);
a zone in ``[people]`` config wins over it; the name they last wrote under (for the control
center, which shows people and conversations by name); whether they asked for the usage
footer under each answer (``/usage footer on``). ``known_chats``: names of chats (a Telegram
group's title) learned from the messages that came from them, for platforms that cannot
list their chats. ``person_chats``: the chats a person has had the bot send to, so the first
send to any other chat is confirmed with them first.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gateway.core.messages import ChatType
from gateway.core.services import KnownChat
from gateway.store.engine.db import Database
from gateway.store.engine.sql import PEOPLE_TOPIC, Connection, Cursor

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class Person:
    """What the store knows of one person (``channel:sender id``)."""

    person: str
    name: str | None
    timezone: str | None  # set by asking; a zone in [people] config wins over it
    chats: tuple[tuple[str, str], ...] = ()  # (channel, chat id) they wrote or sent to


class People:
    def __init__(self, db: Database, *, clock: Clock = time.time) -> None:
        self._db = db
        self._clock = clock

    # -- time zones ---------------------------------------------------------------------

    async def zone(self, person: str) -> str | None:
        def parse(cursors: list[Cursor]) -> str | None:
            row = cursors[0].fetchone()
            return None if row is None else row[0]

        return await self._db.select(
            [("SELECT timezone FROM people WHERE person = ?", (person,))], parse
        )

    async def set_zone(self, person: str, timezone: str) -> None:
        """Store ``person``'s zone; every node of a cluster hears of it (``PEOPLE_TOPIC``)."""

        def write(conn: Connection) -> None:
            conn.execute(
                "INSERT INTO people (person, timezone, updated_at) VALUES (?, ?, ?)"
                " ON CONFLICT (person) DO UPDATE SET timezone = excluded.timezone,"
                " updated_at = excluded.updated_at",
                (person, timezone, self._clock()),
            )
            conn.notify(PEOPLE_TOPIC, person)

        await self._db.run(write)

    # -- the usage footer ----------------------------------------------------------------

    async def footer(self, person: str) -> bool:
        """Whether ``person`` wants tokens and cost under each answer."""

        def parse(cursors: list[Cursor]) -> bool:
            row = cursors[0].fetchone()
            return row is not None and bool(row[0])

        return await self._db.select(
            [("SELECT usage_footer FROM people WHERE person = ?", (person,))], parse
        )

    async def set_footer(self, person: str, on: bool) -> None:
        await self._db.run(
            lambda conn: conn.execute(
                "INSERT INTO people (person, usage_footer, updated_at) VALUES (?, ?, ?)"
                " ON CONFLICT (person) DO UPDATE SET usage_footer = excluded.usage_footer,"
                " updated_at = excluded.updated_at",
                (person, int(on), self._clock()),
            )
        )

    # -- names --------------------------------------------------------------------------

    async def name_person(self, person: str, name: str) -> None:
        """Remember the name ``person`` writes under (the caller writes only a change)."""
        await self._db.run(
            lambda conn: conn.execute(
                "INSERT INTO people (person, name, updated_at) VALUES (?, ?, ?)"
                " ON CONFLICT (person) DO UPDATE SET name = excluded.name,"
                " updated_at = excluded.updated_at",
                (person, name, self._clock()),
            ),
            durable=False,  # the message's own commit carries it
        )

    async def listing(self) -> list[Person]:
        """Everyone with a name, a zone or a chat on record, with the chats they use."""

        def query(conn: Connection) -> list[Person]:
            known = {
                person: (name, zone)
                for person, name, zone in conn.execute("SELECT person, name, timezone FROM people")
            }
            chats: dict[str, list[tuple[str, str]]] = {}
            for person, channel, chat_id in conn.execute(
                "SELECT person, channel, chat_id FROM person_chats ORDER BY first_at"
            ):
                chats.setdefault(person, []).append((channel, chat_id))
            return [
                Person(person, *known.get(person, (None, None)), tuple(chats.get(person, ())))
                for person in sorted({*known, *chats})
            ]

        return await self._db.run(query, durable=False)

    async def names(self, persons: Sequence[str]) -> dict[str, str]:
        """The names of those of ``persons`` whose name is on record."""
        if not persons:
            return {}

        def query(conn: Connection) -> dict[str, str]:
            marks = ",".join("?" for _ in persons)
            rows = conn.execute(
                f"SELECT person, name FROM people WHERE name IS NOT NULL AND person IN ({marks})",
                tuple(persons),
            )
            return {str(person): str(name) for person, name in rows.fetchall()}

        return await self._db.run(query, durable=False)

    # -- chats known by name --------------------------------------------------------------

    async def name_chat(self, channel: str, chat_id: str, name: str, kind: str) -> None:
        """Remember a chat's name; written only when it is new or changed."""

        def upsert(conn: Connection) -> None:
            conn.execute(
                "INSERT INTO known_chats (channel, chat_id, name, kind, updated_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (channel, chat_id) DO UPDATE SET"
                " name = excluded.name, kind = excluded.kind, updated_at = excluded.updated_at",
                (channel, chat_id, name, kind, self._clock()),
            )

        await self._db.run(upsert, durable=False)  # the next message's commit carries it

    async def known_chats(self, channel: str | None = None) -> list[KnownChat]:
        def query(conn: Connection) -> list[KnownChat]:
            sql = "SELECT channel, chat_id, name, kind FROM known_chats"
            args: tuple[str, ...] = ()
            if channel is not None:
                sql, args = sql + " WHERE channel = ?", (channel,)
            rows = conn.execute(sql + " ORDER BY channel, name", args).fetchall()
            return [KnownChat(c, i, n, ChatType(k)) for c, i, n, k in rows]

        return await self._db.run(query, durable=False)

    # -- where a person has sent to -------------------------------------------------------

    async def has_sent_to(self, person: str, channel: str, chat_id: str) -> bool:
        def query(conn: Connection) -> bool:
            row = conn.execute(
                "SELECT 1 FROM person_chats WHERE person = ? AND channel = ? AND chat_id = ?",
                (person, channel, chat_id),
            ).fetchone()
            return row is not None

        return await self._db.run(query, durable=False)

    async def sent_to(
        self, person: str, channel: str, chat_id: str, *, durable: bool = True
    ) -> None:
        """Record that ``person`` uses ``chat_id``. ``durable=False`` for what the next
        commit may carry (a chat they wrote in: losing it costs one question at most)."""
        await self._db.run(
            lambda conn: conn.execute(
                "INSERT INTO person_chats (person, channel, chat_id, first_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (person, channel, chat_id) DO NOTHING",
                (person, channel, chat_id, self._clock()),
            ),
            durable=durable,
        )
