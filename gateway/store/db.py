"""One SQLite database, one writer thread, group commit.

Every read and write runs on a dedicated thread that owns the connection, so the event
loop never blocks on disk. Jobs that arrive together share one transaction (each inside
its own savepoint, so one failing job does not undo the others): with 50 chats writing at
once that is one fsync instead of fifty. ``await db.run(fn)`` returns only after the
transaction holding ``fn`` has committed, which is what "journaled before acknowledged"
needs.

``db.run(fn, durable=False)`` is for checkpoints that may be lost with the machine's power
(a turn's start, its drafts): a transaction holding only such jobs commits without an fsync
(``synchronous=NORMAL``). Commits stay in order in the WAL, so the next durable commit makes
everything before it durable too, and a power cut can only lose a tail of checkpoints; a
crash of the process loses nothing. With ``storage.synchronous = "normal"`` no commit fsyncs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from gateway.core.errors import StorageFullError, StoreDamagedError, StoreError
from gateway.core.lifecycle import Service
from gateway.store.integrity import check_before_open, check_opened, damaged, is_damage
from gateway.store.schema import MIGRATIONS, migrate

log = logging.getLogger(__name__)

T = TypeVar("T")
Job = Callable[[sqlite3.Connection], T]

_MAX_BATCH = 128
_SQLITE_FULL = 13


@dataclass(slots=True)
class _Pending:
    fn: Callable[[sqlite3.Connection], Any]
    future: asyncio.Future[Any]
    durable: bool


class _Stop:
    pass


class _BatchRolledBack(Exception):
    """A job's error made SQLite roll back the whole transaction (SQLITE_FULL does): every
    job of the batch failed with it."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


class Database(Service):
    """Async facade over one SQLite file in WAL mode."""

    def __init__(self, path: Path, *, synchronous: Literal["full", "normal"] = "full") -> None:
        self.path = path
        self._synchronous = synchronous.upper()
        self._sync_now = self._synchronous  # the connection's current setting
        self._queue: queue.SimpleQueue[_Pending | _Stop] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._open_error: BaseException | None = None

    async def start(self) -> None:
        if self._thread is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._worker, name="switchboard-db", daemon=True)
        self._thread.start()
        await asyncio.to_thread(self._ready.wait)
        if self._open_error is not None:
            self._thread = None
            if isinstance(self._open_error, StoreDamagedError):
                raise self._open_error
            if isinstance(self._open_error, sqlite3.Error) and is_damage(self._open_error):
                raise damaged(self.path, f"cannot be read ({self._open_error})")
            raise StoreError(f"cannot open {self.path}: {self._open_error}") from self._open_error

    async def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._queue.put(_Stop())
        await asyncio.to_thread(thread.join)

    async def run(self, fn: Job[T], *, durable: bool = True) -> T:
        """Run ``fn(connection)`` in a transaction; return once it is committed (and, if
        ``durable``, on disk: see the module docstring)."""
        if self._thread is None or self._loop is None:
            raise StoreError("database is not open")
        future: asyncio.Future[T] = self._loop.create_future()
        self._queue.put(_Pending(fn, future, durable))
        return await future

    # -- writer thread -------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        # SQLite gives the -wal and -shm files the database file's mode: make it 0600 before
        # they exist, and fix files left 0644 by an older version.
        check_before_open(self.path)
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        self.path.chmod(0o600)
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            check_opened(conn, self.path, len(MIGRATIONS))
        except BaseException:
            conn.close()
            raise
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=5000")
        migrate(conn)
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                Path(f"{self.path}{suffix}").chmod(0o600)
        return conn

    def _worker(self) -> None:
        try:
            conn = self._connect()
        except (sqlite3.Error, OSError, StoreDamagedError) as exc:
            self._open_error = exc
            self._ready.set()
            return
        self._ready.set()
        stopping = False
        try:
            while not stopping:
                batch: list[_Pending] = []
                item = self._queue.get()
                while True:
                    if isinstance(item, _Stop):
                        stopping = True
                        break
                    batch.append(item)
                    if len(batch) >= _MAX_BATCH:
                        break
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        break
                if batch:
                    self._run_batch(conn, batch)
        finally:
            conn.close()

    def _run_batch(self, conn: sqlite3.Connection, batch: list[_Pending]) -> None:
        outcomes: list[tuple[_Pending, Any, BaseException | None]] = []
        try:
            self._set_sync(conn, any(job.durable for job in batch))
            conn.execute("BEGIN IMMEDIATE")
            if len(batch) == 1:  # alone: the transaction itself is the job's boundary
                job = batch[0]
                try:
                    outcomes.append((job, job.fn(conn), None))
                except Exception as exc:
                    if conn.in_transaction:  # SQLite may have rolled it back (disk full)
                        conn.execute("ROLLBACK")
                    outcomes.append((job, None, _translate(exc)))
                else:
                    conn.execute("COMMIT")
                self._loop_deliver(outcomes)
                return
            for job in batch:
                conn.execute("SAVEPOINT job")
                try:
                    result = job.fn(conn)
                except Exception as exc:  # the job's own error goes back to its caller
                    if not conn.in_transaction:  # SQLite undid the whole batch (disk full)
                        raise _BatchRolledBack(exc) from exc
                    conn.execute("ROLLBACK TO job")
                    conn.execute("RELEASE job")
                    outcomes.append((job, None, _translate(exc)))
                else:
                    conn.execute("RELEASE job")
                    outcomes.append((job, result, None))
            conn.execute("COMMIT")
        except (sqlite3.Error, _BatchRolledBack) as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            error = _translate(exc.cause if isinstance(exc, _BatchRolledBack) else exc)
            if isinstance(error, StorageFullError):  # said once, with advice, by the runtime
                log.warning("store transaction failed: %s", error)
            else:
                log.exception("store transaction failed: %s", error)
            outcomes = [(job, None, error) for job in batch]
        self._loop_deliver(outcomes)

    def _set_sync(self, conn: sqlite3.Connection, durable: bool) -> None:
        """FULL for a transaction that must survive a power cut, NORMAL otherwise (never
        stronger than configured). Only between transactions, as SQLite requires."""
        wanted = self._synchronous if durable else "NORMAL"
        if wanted != self._sync_now:
            conn.execute(f"PRAGMA synchronous={wanted}")
            self._sync_now = wanted

    def _loop_deliver(self, outcomes: list[tuple[_Pending, Any, BaseException | None]]) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(_deliver, outcomes)


def _translate(exc: BaseException) -> BaseException:
    if isinstance(exc, sqlite3.Error):
        if (getattr(exc, "sqlite_errorcode", 0) & 0xFF) == _SQLITE_FULL:
            return StorageFullError("the disk holding the Switchboard store is full")
        return StoreError(str(exc))
    return exc


def _deliver(outcomes: list[tuple[_Pending, Any, BaseException | None]]) -> None:
    for job, result, error in outcomes:
        if job.future.done():  # the caller gave up (cancelled); the write still happened
            continue
        if error is not None:
            job.future.set_exception(error)
        else:
            job.future.set_result(result)
