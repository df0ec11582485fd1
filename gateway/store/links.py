"""Addresses people linked themselves, and the short-lived codes that link them.

A link says "this address is one of that person's" (``person_links``): the person is named
by their key, an address. Addresses listed together in config (``[people.<name>] ids``) are
not stored here: config is read at start, these are what ``/link`` (or the owner's control
center) made. A code (``link_codes``) is made by ``/link`` on one address and used once by
the same person on another; one that would raise someone's role waits for the owner
(``waiting``) instead of linking (gateway/runtime/people/linking.py). Times are given by
the caller (the gateway's clock), so a code's ten minutes can be tested without waiting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gateway.store.access import new_code
from gateway.store.engine.db import Database
from gateway.store.engine.sql import Connection, Cursor

CodeState = Literal["open", "waiting", "used"]


@dataclass(frozen=True, slots=True)
class LinkCode:
    code: str
    address: str  # who asked for it with /link
    state: CodeState
    expires_at: float
    used_by: str | None  # the address that sent it
    asked_in: str | None = None  # the conversation of the chat that asked for it


@dataclass(frozen=True, slots=True)
class StoredLink:
    address: str
    person: str
    linked_at: float
    linked_by: str


_CODE_COLUMNS = "code, address, state, expires_at, used_by, asked_in"


def _code(row: Sequence[Any]) -> LinkCode:
    used_by = None if row[4] is None else str(row[4])
    asked_in = None if row[5] is None else str(row[5])
    return LinkCode(str(row[0]), str(row[1]), row[2], float(row[3]), used_by, asked_in)


class PersonLinks:
    def __init__(self, db: Database) -> None:
        self._db = db

    # -- links --------------------------------------------------------------------------

    async def person_of(self, address: str) -> str | None:
        """The person ``address`` was linked to, if it was."""

        def parse(cursors: list[Cursor]) -> str | None:
            row = cursors[0].fetchone()
            return None if row is None else str(row[0])

        return await self._db.select(
            [("SELECT person FROM person_links WHERE address = ?", (address,))], parse
        )

    async def linked_to(self, persons: Sequence[str]) -> list[str]:
        """The addresses linked to any of ``persons``, oldest link first."""
        if not persons:
            return []
        marks = ",".join("?" for _ in persons)

        def parse(cursors: list[Cursor]) -> list[str]:
            return [str(address) for (address,) in cursors[0].fetchall()]

        return await self._db.select(
            [
                (
                    f"SELECT address FROM person_links WHERE person IN ({marks})"
                    " ORDER BY linked_at, address",
                    tuple(persons),
                )
            ],
            parse,
        )

    async def listing(self) -> list[StoredLink]:
        def query(conn: Connection) -> list[StoredLink]:
            rows = conn.execute(
                "SELECT address, person, linked_at, linked_by FROM person_links"
                " ORDER BY person, linked_at"
            ).fetchall()
            return [StoredLink(str(a), str(p), float(at), str(by)) for a, p, at, by in rows]

        return await self._db.run(query, durable=False)

    async def link(self, address: str, person: str, *, by: str, now: float) -> None:
        """``address`` is one of ``person``'s from now on; addresses linked to ``address``
        itself (it was a person's key) move with it."""

        def write(conn: Connection) -> None:
            conn.execute("UPDATE person_links SET person = ? WHERE person = ?", (person, address))
            conn.execute(
                "INSERT INTO person_links (address, person, linked_at, linked_by)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (address) DO UPDATE SET"
                " person = excluded.person, linked_at = excluded.linked_at,"
                " linked_by = excluded.linked_by",
                (address, person, now, by),
            )

        await self._db.run(write)

    async def unlink(self, address: str) -> list[str]:
        """``address`` is nobody else's any more: its own link goes, and so do the links
        to it (it was the key of a person others were linked to). The addresses that
        were linked, ``address`` among them when it was."""

        def write(conn: Connection) -> list[str]:
            rows = conn.execute(
                "SELECT address FROM person_links WHERE address = ? OR person = ?"
                " ORDER BY linked_at",
                (address, address),
            ).fetchall()
            conn.execute(
                "DELETE FROM person_links WHERE address = ? OR person = ?", (address, address)
            )
            return [str(a) for (a,) in rows]

        return await self._db.run(write)

    # -- codes --------------------------------------------------------------------------

    async def new_code(
        self, address: str, *, asked_in: str | None = None, now: float, ttl: float
    ) -> LinkCode:
        """A fresh code for ``address``, asked for in the conversation ``asked_in``; its
        earlier open codes, and every expired one, go."""
        code = new_code()

        def write(conn: Connection) -> None:
            conn.execute(
                "DELETE FROM link_codes WHERE expires_at <= ? OR (address = ? AND state = 'open')",
                (now, address),
            )
            conn.execute(
                "INSERT INTO link_codes (code, address, state, created_at, expires_at, asked_in)"
                " VALUES (?, ?, 'open', ?, ?, ?)",
                (code, address, now, now + ttl, asked_in),
            )

        await self._db.run(write)
        return LinkCode(code, address, "open", now + ttl, None, asked_in)

    async def peek(self, code: str) -> LinkCode | None:
        def parse(cursors: list[Cursor]) -> LinkCode | None:
            row = cursors[0].fetchone()
            return None if row is None else _code(row)

        return await self._db.select(
            [(f"SELECT {_CODE_COLUMNS} FROM link_codes WHERE code = ?", (code.strip().upper(),))],
            parse,
        )

    async def take(
        self, code: str, *, by: str, now: float, state: CodeState, ttl: float | None = None
    ) -> LinkCode | None:
        """Use an open code, once: it becomes ``state`` (``used``, or ``waiting`` for the
        owner, then for ``ttl`` seconds). ``None`` when no such open, unexpired code exists
        (used already, expired, never made) or it is ``by``'s own."""
        code = code.strip().upper()

        expires = "expires_at" if ttl is None else str(now + ttl)  # a number, not text

        def write(conn: Connection) -> LinkCode | None:
            cursor = conn.execute(
                f"UPDATE link_codes SET state = ?, used_by = ?, used_at = ?, expires_at = {expires}"
                " WHERE code = ? AND state = 'open' AND expires_at > ? AND address <> ?",
                (state, by, now, code, now, by),
            )
            return _changed_code(conn, cursor.rowcount, code)

        return await self._db.run(write)

    async def confirm(self, code: str, *, now: float) -> LinkCode | None:
        """The owner's word on a code waiting for it: used from now on; ``None`` when no
        such code waits (decided already, expired)."""
        code = code.strip().upper()

        def write(conn: Connection) -> LinkCode | None:
            cursor = conn.execute(
                "UPDATE link_codes SET state = 'used' WHERE code = ? AND state = 'waiting'"
                " AND expires_at > ?",
                (code, now),
            )
            return _changed_code(conn, cursor.rowcount, code)

        return await self._db.run(write)

    async def waiting(self, *, now: float) -> list[LinkCode]:
        """Links waiting for the owner's word, oldest first."""

        def query(conn: Connection) -> list[LinkCode]:
            rows = conn.execute(
                f"SELECT {_CODE_COLUMNS} FROM link_codes WHERE state = 'waiting'"
                " AND expires_at > ? ORDER BY created_at",
                (now,),
            ).fetchall()
            return [_code(row) for row in rows]

        return await self._db.run(query, durable=False)


def _changed_code(conn: Connection, changed: int, code: str) -> LinkCode | None:
    """The code an ``UPDATE`` just changed, as it is now (``None``: it changed none)."""
    if changed == 0:
        return None
    row = conn.execute(f"SELECT {_CODE_COLUMNS} FROM link_codes WHERE code = ?", (code,)).fetchone()
    return _code(row)
