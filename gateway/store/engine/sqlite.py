"""The embedded engine: one SQLite file in WAL mode (``storage.url`` unset)."""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from gateway.core.errors import SchemaRefused, StorageFullError, StoreError
from gateway.store.cluster.fencing import Fence, check_statement
from gateway.store.engine.backups import before_migration
from gateway.store.engine.db import Engine, Job, Reader, ReaderBusy, T
from gateway.store.engine.integrity import check_before_open, check_opened, damaged, is_damage
from gateway.store.engine.schema import MIGRATIONS, migrate
from gateway.store.engine.sql import SQLITE, Connection, Cursor, Dialect, Statement

log = logging.getLogger(__name__)

_SQLITE_BUSY = 5
_SQLITE_FULL = 13


class SqliteConnection:
    """:class:`~gateway.store.engine.sql.Connection` over :mod:`sqlite3` (same placeholders)."""

    dialect: Dialect = SQLITE

    def __init__(self, raw: sqlite3.Connection) -> None:
        self.raw = raw

    def execute(self, sql: str, params: Sequence[Any] = (), /) -> Cursor:
        return self.raw.execute(sql, params)

    def executemany(self, sql: str, params: Iterable[Sequence[Any]], /) -> Cursor:
        return self.raw.executemany(sql, params)

    def execute_together(self, statements: Sequence[Statement], /) -> list[Cursor]:
        """One after the other (a statement costs no round trip here)."""
        return [self.raw.execute(sql, params) for sql, params in statements]

    def notify(self, topic: str, payload: str = "") -> None:
        """Nothing: one process wakes itself in memory."""


class SqliteEngine(Engine):
    dialect = SQLITE

    def __init__(
        self,
        path: Path,
        *,
        synchronous: Literal["full", "normal"] = "full",
        backups: Path | None = None,
        migrate: bool = True,
    ) -> None:
        self.path = path
        self._backups = backups  # a copy goes there before a migration (None: no copy)
        self._migrate = migrate  # False: an older schema is refused, not migrated
        self._synchronous = synchronous.upper()
        self._sync_now = self._synchronous  # the connection's current setting
        self._raw: sqlite3.Connection | None = None
        self._savepoints = False  # each job of the open transaction in a savepoint
        self._first_job = True
        self._checked: set[Fence] = set()  # claims checked in the open transaction
        self._job_fence: Fence | None = None  # ... by the current job
        self._reader: SqliteReader | None = None  # the one beside the writer, once made
        self._reader_trace: Callable[[str], object] | None = None

    @property
    def description(self) -> str:
        return f"the SQLite store {self.path}"

    def open(self) -> Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # SQLite gives the -wal and -shm files the database file's mode: make it 0600 before
        # they exist, and fix files left 0644 by an older version.
        check_before_open(self.path)  # a damaged or foreign file is refused, never replaced
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        self.path.chmod(0o600)
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            if is_damage(exc):
                raise damaged(self.path, f"cannot be read ({exc})") from exc
            raise
        try:
            check_opened(conn, self.path, len(MIGRATIONS))
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA busy_timeout=5000")
            (version,) = conn.execute("PRAGMA user_version").fetchone()
            if not self._migrate:
                refuse_older(self.path, version)
            if self._backups is not None and 0 < version < len(MIGRATIONS):
                copy = before_migration(self.path, self._backups, version)
                log.info(
                    "copied the store %s to %s; migrating it from schema v%d to v%d",
                    self.path, copy.path, version, len(MIGRATIONS),
                )  # fmt: skip
                self.migrated_from = copy
            migrate(conn)
            if 0 < version < len(MIGRATIONS):
                log.info("migrated the store %s to schema v%d", self.path, len(MIGRATIONS))
        except sqlite3.Error as exc:
            conn.close()
            if is_damage(exc):
                raise damaged(self.path, f"cannot be read ({exc})") from exc
            raise
        except BaseException:
            conn.close()
            raise
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                Path(f"{self.path}{suffix}").chmod(0o600)
        self._raw = conn
        self._sync_now = self._synchronous
        return SqliteConnection(conn)

    def close(self) -> None:
        self._reader = None  # closed by the database first
        raw, self._raw = self._raw, None
        if raw is not None:
            raw.close()

    def usable(self) -> bool:
        return self._raw is not None

    def begin(self, durable: bool, *, savepoint: bool = False) -> None:
        assert self._raw is not None
        # FULL for a transaction that must survive a power cut, NORMAL otherwise (never
        # stronger than configured). Only between transactions, as SQLite requires.
        wanted = self._synchronous if durable else "NORMAL"
        if wanted != self._sync_now:
            self._raw.execute(f"PRAGMA synchronous={wanted}")
            self._sync_now = wanted
        self._raw.execute("BEGIN IMMEDIATE")
        self._savepoints = savepoint
        self._first_job = True
        self._checked.clear()

    def start_job(self, fence: Fence | None) -> None:
        assert self._raw is not None
        if self._savepoints:
            if not self._first_job:
                self._raw.execute("RELEASE SAVEPOINT job")
            self._raw.execute("SAVEPOINT job")
        self._first_job = False
        self._job_fence = None
        if fence is not None and fence not in self._checked:
            check_statement(self._connection(), fence)
            self._checked.add(fence)
            self._job_fence = fence

    def finish_job(self) -> None:
        """Nothing: every statement ran when the job called it."""

    def undo_job(self) -> None:
        assert self._raw is not None
        self._raw.execute("ROLLBACK TO SAVEPOINT job")
        if self._job_fence is not None:
            self._checked.discard(self._job_fence)

    def end(self, commit: bool) -> None:
        assert self._raw is not None
        if self._raw.in_transaction:
            self._raw.execute("COMMIT" if commit else "ROLLBACK")

    def batch_undone(self) -> bool:
        return self._raw is None or not self._raw.in_transaction

    def reader(self) -> Reader:
        self._reader = SqliteReader(self.path)
        self._reader.raw.set_trace_callback(self._reader_trace)
        return self._reader

    def trace(
        self, writer: Callable[[str], object] | None, reader: Callable[[str], object] | None
    ) -> None:
        """Hand every statement the writer runs to ``writer``, and those of the readers to
        ``reader`` (a benchmark's count; ``None`` stops it)."""
        self._reader_trace = reader
        if self._raw is not None:
            self._raw.set_trace_callback(writer)
        if self._reader is not None:
            self._reader.raw.set_trace_callback(reader)

    def _connection(self) -> Connection:
        assert self._raw is not None
        return SqliteConnection(self._raw)

    def is_engine_error(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.Error)

    def translate(self, exc: BaseException) -> StoreError:
        if (getattr(exc, "sqlite_errorcode", 0) & 0xFF) == _SQLITE_FULL:
            return StorageFullError("the disk holding the Switchboard store is full")
        return StoreError(str(exc))


class SqliteReader(Reader):
    """Reads beside the writer: a connection of its own that may only read
    (``query_only``), each read in a transaction of its own, so it sees one committed state.
    It never waits: a busy database (a WAL being recovered) sends the read to the writer."""

    def __init__(self, path: Path) -> None:
        raw = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        raw.execute("PRAGMA query_only=ON")
        raw.execute("PRAGMA busy_timeout=0")
        self._conn = SqliteConnection(raw)

    @property
    def raw(self) -> sqlite3.Connection:
        return self._conn.raw

    def read(self, fn: Job[T], fence: Fence | None) -> T:
        raw = self.raw
        try:
            raw.execute("BEGIN")
            try:
                if fence is not None:
                    check_statement(self._conn, fence)
                return fn(self._conn)
            finally:
                if raw.in_transaction:
                    raw.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            if (getattr(exc, "sqlite_errorcode", 0) & 0xFF) == _SQLITE_BUSY:
                raise ReaderBusy(str(exc)) from exc
            raise

    def close(self) -> None:
        self.raw.close()


def refuse_older(path: Path, version: int) -> None:
    """A command beside the gateway never migrates the store: the gateway of the older
    version may be running on it."""
    if 0 < version < len(MIGRATIONS):
        raise SchemaRefused(
            f"the store {path} has schema version {version} and this Switchboard needs "
            f"{len(MIGRATIONS)}: the gateway migrates it when it starts (`switchboard run`, "
            "after a copy), or `switchboard upgrade --i-have-a-backup` does (the gateway "
            "stopped; a copy first too); a gateway of the older version may be running on it. "
            "Nothing was changed."
        )
