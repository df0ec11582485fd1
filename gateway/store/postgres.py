"""The server engine: a PostgreSQL database (``storage.url = "postgresql://…"``), via psycopg 3.

Statements keep the store's ``?`` placeholders; they are rewritten to psycopg's ``%s`` once
per statement text (:func:`~gateway.store.sql.to_format_style`) and bound on the client
(``ClientCursor``), so ``? IS NULL`` needs no type hints. The connection runs in autocommit
mode and the writer thread opens its transactions itself, as with SQLite. A lost connection
fails the jobs of that moment with :class:`~gateway.core.errors.StoreUnavailable` and is
reopened for the next batch.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors

from gateway.core.errors import StorageFullError, StoreError, StoreUnavailable
from gateway.store.db import Engine
from gateway.store.schema_pg import migrate_pg
from gateway.store.sql import POSTGRESQL, Connection, Cursor, Dialect, to_format_style

CONNECT_TIMEOUT = 5  # seconds


def redacted(url: str) -> str:
    """``url`` without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))


def is_postgres_url(url: str) -> bool:
    return urlsplit(url).scheme in ("postgresql", "postgres")


def _clean(value: Any) -> Any:
    # PostgreSQL text cannot hold NUL characters; SQLite can. Store the replacement character.
    if isinstance(value, str) and "\x00" in value:
        return value.replace("\x00", "\ufffd")
    return value


class PostgresConnection:
    """:class:`~gateway.store.sql.Connection` over one psycopg connection."""

    dialect: Dialect = POSTGRESQL

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw

    def execute(self, sql: str, params: Sequence[Any] = (), /) -> Cursor:
        return self.raw.execute(to_format_style(sql), [_clean(v) for v in params])

    def executemany(self, sql: str, params: Iterable[Sequence[Any]], /) -> Cursor:
        cursor = self.raw.cursor()
        cursor.executemany(to_format_style(sql), [[_clean(v) for v in row] for row in params])
        return cursor


def local_time_zone() -> str | None:
    """This machine's IANA time zone name, so "today" in usage reports matches SQLite's
    ``localtime`` (``None``: leave the server's setting)."""
    name = os.environ.get("TZ", "").lstrip(":")
    if name:
        return name
    try:
        target = Path("/etc/localtime").resolve()
    except OSError:
        return None
    parts = target.parts
    if "zoneinfo" in parts:
        return "/".join(parts[parts.index("zoneinfo") + 1 :]) or None
    return None


class PostgresEngine(Engine):
    dialect = POSTGRESQL

    def __init__(
        self, url: str, *, synchronous: Literal["full", "normal"] = "full", node: str = ""
    ) -> None:
        self.url = url
        # named after the node, so the server (and the status page) can tell whose it is
        self._application = f"switchboard store {node}".strip()[:63]
        self._relaxed = synchronous == "normal"
        self._raw: psycopg.Connection[Any] | None = None

    @property
    def description(self) -> str:
        return f"PostgreSQL at storage.url = {redacted(self.url)}"

    def open(self) -> Connection:
        self.close()
        try:
            raw = psycopg.connect(
                self.url,
                autocommit=True,
                cursor_factory=psycopg.ClientCursor,
                connect_timeout=CONNECT_TIMEOUT,
                application_name=self._application,
            )
        except psycopg.Error as exc:
            raise StoreUnavailable(f"cannot reach {self.description}: {str(exc).strip()}") from exc
        try:
            zone = local_time_zone()
            if zone is not None:
                try:
                    raw.execute("SELECT set_config('TimeZone', %s, false)", [zone])
                except pg_errors.InvalidParameterValue:
                    offset = -time.timezone // 60
                    raw.execute(f"SET TIME ZONE INTERVAL '{offset:+d} minutes'")
            migrate_pg(raw)
        except BaseException:
            raw.close()
            raise
        self._raw = raw
        return PostgresConnection(raw)

    def close(self) -> None:
        raw, self._raw = self._raw, None
        if raw is not None:
            raw.close()

    def usable(self) -> bool:
        return self._raw is not None and not self._raw.closed and not self._raw.broken

    def begin(self, durable: bool, *, savepoint: bool = False) -> None:
        # one round trip (the connection binds on the client: several statements may go
        # in one simple query)
        statements = ["BEGIN"]
        if self._relaxed or not durable:
            statements.append("SET LOCAL synchronous_commit = off")
        if savepoint:
            statements.append("SAVEPOINT job")
        assert self._raw is not None
        self._raw.execute("; ".join(statements))

    def next_savepoint(self) -> None:
        assert self._raw is not None
        self._raw.execute("RELEASE SAVEPOINT job; SAVEPOINT job")

    def end(self, commit: bool) -> None:
        assert self._raw is not None
        status = self._raw.info.transaction_status
        if status == psycopg.pq.TransactionStatus.IDLE:
            return
        if commit and status == psycopg.pq.TransactionStatus.INERROR:
            # PostgreSQL would answer COMMIT with a silent ROLLBACK: say it failed instead
            self._raw.execute("ROLLBACK")
            raise StoreError("the transaction failed and was rolled back")
        self._raw.execute("COMMIT" if commit else "ROLLBACK")

    def in_transaction(self) -> bool:
        # a failed statement leaves it INERROR: still open, a savepoint rollback recovers it
        return (
            self._raw is not None
            and self._raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
        )

    def is_engine_error(self, exc: BaseException) -> bool:
        return isinstance(exc, psycopg.Error)

    def translate(self, exc: BaseException) -> StoreError:
        if isinstance(exc, pg_errors.DiskFull):
            return StorageFullError("the disk holding the Switchboard database is full")
        if isinstance(exc, psycopg.OperationalError) or (
            self._raw is not None and self._raw.broken
        ):
            return StoreUnavailable(f"lost the connection to {self.description}: {exc}")
        return StoreError(str(exc))
