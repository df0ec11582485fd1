"""The server engine: a PostgreSQL database (``storage.url = "postgresql://…"``), via psycopg 3.

Statements keep the store's ``?`` placeholders and are bound on the client
(gateway/store/engine/pg_wire.py), so ``? IS NULL`` needs no type hints and several statements can
go in one query. The connection runs in autocommit mode and the writer thread's
transactions are sent along with the statements that need them
(gateway/store/engine/pg_transaction.py). A lost connection
fails the jobs of that moment with :class:`~gateway.core.errors.StoreUnavailable` and is
reopened for the next batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors

from gateway.core.errors import StorageFullError, StoreError, StoreUnavailable
from gateway.store.cluster.fencing import Fence
from gateway.store.engine.db import Engine, SelectAnswer
from gateway.store.engine.pg_transaction import LazyTransaction
from gateway.store.engine.schema_pg import migrate_pg
from gateway.store.engine.sql import POSTGRESQL, Connection, Cursor, Dialect, Statement

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


class PostgresConnection:
    """:class:`~gateway.store.engine.sql.Connection` over one psycopg connection, its statements
    sent with the batch's transaction plumbing (:class:`LazyTransaction`)."""

    dialect: Dialect = POSTGRESQL

    def __init__(self, transaction: LazyTransaction) -> None:
        self.transaction = transaction

    def execute(self, sql: str, params: Sequence[Any] = (), /) -> Cursor:
        return self.transaction.execute(sql, params)

    def executemany(self, sql: str, params: Iterable[Sequence[Any]], /) -> Cursor:
        return self.transaction.executemany(sql, params)

    def execute_together(self, statements: Sequence[Statement], /) -> list[Cursor]:
        return self.transaction.execute_together(statements)

    def notify(self, topic: str, payload: str = "") -> None:
        self.transaction.notify(topic, payload)


class PostgresEngine(Engine):
    dialect = POSTGRESQL

    def __init__(
        self,
        url: str,
        *,
        synchronous: Literal["full", "normal"] = "full",
        node: str = "",
        migrate: bool = True,
    ) -> None:
        self.url = url
        self._migrate = migrate  # its owner said a backup exists (or storage.migrate = "auto")
        # named after the node, so the server (and the control center) can tell whose it is
        self._application = f"switchboard store {node}".strip()[:63]
        self._relaxed = synchronous == "normal"
        self._raw: psycopg.Connection[Any] | None = None
        self._transaction: LazyTransaction | None = None

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
                client_encoding="UTF8",  # what the store's queries are encoded in
            )
        except psycopg.Error as exc:
            raise StoreUnavailable(f"cannot reach {self.description}: {str(exc).strip()}") from exc
        try:
            migrate_pg(raw, allowed=self._migrate, where=redacted(self.url))
        except BaseException:
            raw.close()
            raise
        self._raw = raw
        self._transaction = LazyTransaction(raw)
        return PostgresConnection(self._transaction)

    def close(self) -> None:
        raw, self._raw = self._raw, None
        self._transaction = None
        if raw is not None:
            raw.close()

    def usable(self) -> bool:
        return self._raw is not None and not self._raw.closed and not self._raw.broken

    def select_together(
        self, selects: Sequence[tuple[Fence | None, Sequence[Statement]]]
    ) -> list[SelectAnswer]:
        return self._batch().select_together(selects)

    def begin(self, durable: bool, *, savepoint: bool = False) -> None:
        self._batch().begin(relaxed=self._relaxed or not durable, savepoints=savepoint)

    def start_job(self, fence: Fence | None) -> None:
        self._batch().start_job(fence)

    def finish_job(self) -> None:
        self._batch().finish_job()

    def undo_job(self) -> None:
        self._batch().undo_job()

    def end(self, commit: bool) -> None:
        self._batch().end(commit)

    def batch_undone(self) -> bool:
        """Never: PostgreSQL aborts a failed statement, not the transaction around it (a
        lost connection fails the batch when its savepoint cannot be rolled back)."""
        return False

    def _batch(self) -> LazyTransaction:
        assert self._transaction is not None, "the connection is not open"
        return self._transaction

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
