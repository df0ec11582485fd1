"""One database connection, one writer thread, group commit, on either engine.

Every write, and every read but the short ones of a turn's hot path (``read``, below), runs
on a dedicated thread that owns the connection, so the event loop does not block on disk or
network. Jobs that arrive together share one transaction (each
inside its own savepoint, so one failing job does not undo the others): with 50 chats
writing at once that is one fsync instead of fifty. ``await db.run(fn)`` returns only after
the transaction holding ``fn`` has committed, which is what "journaled before acknowledged"
needs.

``db.run(fn, urgent=True)`` jumps the queue: the next transaction holds only urgent jobs
(the outbox's record that a send is starting, or what it returned), so a send's record is
never held up behind a batch of other work (:mod:`gateway.store.outbox`).

``db.run(fn, durable=False)`` is for checkpoints that may be lost with the machine's power
(a turn's start, its drafts): a transaction holding only such jobs commits without waiting
for the disk (SQLite ``synchronous=NORMAL``; PostgreSQL ``synchronous_commit = off``).
Commits stay in order, so the next durable commit makes everything before it durable too,
and a power cut can only lose a tail of checkpoints; a crash of the process loses nothing.
Reads pass ``durable=False`` too: a read that joined a batch as durable would make the whole
batch wait for the disk (on the hot path, a budget check made a turn's checkpoints fsync).

``await db.select(statements, parse)`` is such a read declared up front: statements that
need no result of each other, and what to make of their results (:class:`Select`). On
PostgreSQL the selects waiting on the writer together go to the server in one query, each
with its claim's check: in a burst, the history, pins, budget and zone reads of many turns
cost one round trip instead of one each.

``await db.read(fn)`` is for the short, indexed reads of a turn's hot path (its history,
the outbox's next message, a person's zone). On SQLite it runs at once on the caller's
thread over a read-only connection of its own (:meth:`Engine.reader`): a WAL reader never
waits for the writer, and handing a small read to the writer's thread and back costs more
CPU than the read itself (two thread wake-ups, about 0.1 ms against a few microseconds;
bench/turn_cost.py counts both). It sees every transaction committed when it starts, so
every write whose ``run`` has returned. It blocks the event loop for as long as it takes,
so a large scan stays a job (``run(fn, durable=False)``). Elsewhere (PostgreSQL: a query
is a network round trip) ``read`` is such a job.

A job run by a turn in a cluster carries the turn's claim on its session
(:data:`~gateway.store.cluster.fencing.FENCE`): its transaction checks that claim before the job's
first statement, once per session per transaction, and the job fails with ``StaleClaim``
when another node claimed the session since (gateway/store/cluster/fencing.py).

On PostgreSQL the transaction's plumbing (``BEGIN``, savepoints, the claim checks,
``NOTIFY``) travels with the jobs' own statements instead of costing round trips of its own
(gateway/store/engine/pg_transaction.py).

The engine (:class:`Engine`) is the SQLite file (:mod:`gateway.store.engine.sqlite`) or a
PostgreSQL server (:mod:`gateway.store.engine.postgres`), chosen by ``storage.url``; jobs see
only the :class:`~gateway.store.engine.sql.Connection` seam.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from gateway.core.errors import StaleClaim, StorageFullError, StoreError
from gateway.core.lifecycle import Service
from gateway.store.cluster.fencing import FENCE, Fence
from gateway.store.engine.sql import Connection, Cursor, Dialect, Statement

if TYPE_CHECKING:
    from gateway.store.engine.backups import Backup

log = logging.getLogger(__name__)

T = TypeVar("T")
Job = Callable[[Connection], T]

_MAX_BATCH = 128


@dataclass(frozen=True, slots=True)
class Select(Generic[T]):
    """A read declared up front (:meth:`Database.select`): its statements, which need no
    result of each other, and what to make of their cursors. Run as a job, it is both."""

    statements: Sequence[Statement]
    parse: Callable[[list[Cursor]], T]

    def __call__(self, conn: Connection) -> T:
        return self.parse(conn.execute_together(self.statements))


# what an engine's select_together returns per select: its cursors, or its claim refused
SelectAnswer = list[Cursor] | StaleClaim


class Engine(ABC):
    """One connection to one database, used from the writer thread only."""

    dialect: Dialect
    # the copy made before this process migrated the store (SQLite; None: no migration)
    migrated_from: Backup | None = None

    @property
    @abstractmethod
    def description(self) -> str:
        """Where the data lives, for messages (never a password)."""

    @abstractmethod
    def open(self) -> Connection:
        """Connect, bring the schema up to date, and return the connection."""

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def usable(self) -> bool:
        """Whether the connection is open (a lost server connection is reopened)."""

    @abstractmethod
    def begin(self, durable: bool, *, savepoint: bool = False) -> None:
        """Start a batch's transaction; ``durable``: its commit waits for the disk;
        ``savepoint``: each job in a savepoint of its own (a batch of several)."""

    @abstractmethod
    def start_job(self, fence: Fence | None) -> None:
        """The next job of the transaction starts (its savepoint, in a batch of several);
        ``fence``: the claim it runs under, checked before its first statement (once per
        claim per transaction). A stale claim raises ``StaleClaim``: the job's error."""

    @abstractmethod
    def finish_job(self) -> None:
        """The current job returned: send what of it is still held back (an error in it is
        the job's)."""

    @abstractmethod
    def undo_job(self) -> None:
        """Undo the current job's work after its error; the transaction goes on."""

    @abstractmethod
    def end(self, commit: bool) -> None:
        """Commit (or roll back) the open transaction."""

    @abstractmethod
    def batch_undone(self) -> bool:
        """Whether the engine rolled the whole transaction back by itself (SQLite does on a
        full disk)."""

    @abstractmethod
    def is_engine_error(self, exc: BaseException) -> bool: ...

    @abstractmethod
    def translate(self, exc: BaseException) -> StoreError:
        """The engine's error as one of ours."""

    def select_together(
        self, selects: Sequence[tuple[Fence | None, Sequence[Statement]]]
    ) -> list[SelectAnswer] | None:
        """Run the statements of several reads at once, outside any transaction, each read's
        claim (when it has one) checked ahead of its statements; ``None`` when the engine
        has no use for it (SQLite: a statement costs no round trip) and each read runs as
        a job. A statement's error raises (each read then runs as a job, and meets its
        own error)."""
        return None

    def reader(self) -> Reader | None:
        """A connection of its own for :meth:`Database.read` on the caller's thread, where
        the engine's readers never wait for its writer; ``None``: reads are jobs."""
        return None


class Reader(ABC):
    """Reads on the event loop's thread, beside the writer (see the module docstring)."""

    @abstractmethod
    def read(self, fn: Job[T], fence: Fence | None) -> T:
        """``fn(connection)`` in a read transaction of its own (``fence`` checked first);
        raises :class:`ReaderBusy` when the engine cannot read right now without waiting."""

    @abstractmethod
    def close(self) -> None: ...


class ReaderBusy(Exception):
    """The reader would have to wait (SQLite: a WAL being recovered): read on the writer's
    thread instead, which may wait."""


@dataclass(slots=True)
class _Pending:
    fn: Callable[[Connection], Any]
    future: asyncio.Future[Any]
    durable: bool
    urgent: bool = False
    fence: Fence | None = None  # the claim the job's turn runs under (a cluster)


class _Stop:
    pass


class _BatchRolledBack(Exception):
    """A job's error made the engine roll back the whole transaction (SQLite does on a full
    disk): every job of the batch failed with it."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


class Database(Service):
    """Async facade over one engine: jobs run in transactions on its writer thread."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._queue: queue.SimpleQueue[_Pending | _Stop] = queue.SimpleQueue()
        self._urgent: collections.deque[_Pending] = collections.deque()  # jump the queue
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._open_error: BaseException | None = None
        self._conn: Connection | None = None
        self._reader: Reader | None = None
        self._full = False  # the last transaction failed for a full disk (writer thread)

    @property
    def dialect(self) -> Dialect:
        return self.engine.dialect

    async def start(self) -> None:
        if self._thread is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._ready.clear()
        self._open_error = None
        self._thread = threading.Thread(target=self._worker, name="switchboard-db", daemon=True)
        self._thread.start()
        await asyncio.to_thread(self._ready.wait)
        error = self._opening_error()
        if error is not None:
            self._thread = None
            raise error
        self._reader = self.engine.reader()  # after the writer brought the schema up to date

    def _opening_error(self) -> StoreError | None:
        error = self._open_error
        if error is None or isinstance(error, StoreError):
            return error
        wrapped = StoreError(f"cannot open {self.engine.description}: {error}")
        wrapped.__cause__ = error
        return wrapped

    async def stop(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._queue.put(_Stop())
        await asyncio.to_thread(thread.join)

    async def run(self, fn: Job[T], *, durable: bool = True, urgent: bool = False) -> T:
        """Run ``fn(connection)`` in a transaction; return once it is committed (and, if
        ``durable``, on disk; ``urgent``: ahead of the jobs waiting; see the module
        docstring)."""
        if self._thread is None or self._loop is None:
            raise StoreError("database is not open")
        future: asyncio.Future[T] = self._loop.create_future()
        job = _Pending(fn, future, durable, urgent, FENCE.get())
        if urgent:
            self._urgent.append(job)  # the writer takes these first; the put wakes it
        self._queue.put(job)
        return await future

    async def select(
        self, statements: Sequence[Statement], parse: Callable[[list[Cursor]], T]
    ) -> T:
        """:meth:`read` of a read declared up front: ``statements`` (needing no result of
        each other) and ``parse``, which makes the answer of their cursors (see the module
        docstring)."""
        return await self.read(Select(statements, parse))

    async def read(self, fn: Job[T]) -> T:
        """Run the read ``fn(connection)`` and return what it returns: at once on this
        thread where the engine allows (SQLite), else as a job that needs no fsync. For
        short, indexed reads only (see the module docstring)."""
        reader = self._reader
        if reader is not None:
            try:
                return reader.read(fn, FENCE.get())
            except ReaderBusy:
                pass
            except Exception as exc:
                error = self._translate(exc)
                if error is exc:
                    raise
                raise error from exc
        return await self.run(fn, durable=False)

    # -- writer thread -------------------------------------------------------------------

    def _worker(self) -> None:
        try:
            self._conn = self.engine.open()
        except Exception as exc:  # reported to start(), which raises it
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
                    if not item.urgent:  # urgent jobs went (or go) in a batch of their own
                        batch.append(item)
                    if len(batch) >= _MAX_BATCH or self._urgent:
                        break
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        break
                self._run_urgent()
                if batch:
                    self._run_batch(batch)
                    self._run_urgent()
            self._run_urgent()
        finally:
            self.engine.close()

    def _run_urgent(self) -> None:
        """Run the urgent jobs waiting now, in one transaction of their own."""
        batch: list[_Pending] = []
        while self._urgent and len(batch) < _MAX_BATCH:
            batch.append(self._urgent.popleft())
        if batch:
            self._run_batch(batch)

    def _run_batch(self, batch: list[_Pending]) -> None:
        engine = self.engine
        outcomes: list[tuple[_Pending, Any, BaseException | None]] = []
        selected: list[tuple[_Pending, Any, BaseException | None]] = []  # reads answered
        try:
            if not engine.usable():
                self._conn = engine.open()
            conn = self._conn
            assert conn is not None
            batch = self._run_selects(batch, selected)
            if not batch:
                self._loop_deliver(selected)
                return
            engine.begin(any(job.durable for job in batch), savepoint=len(batch) > 1)
            if len(batch) == 1:  # alone: the transaction itself is the job's boundary
                job = batch[0]
                try:
                    engine.start_job(job.fence)
                    result = job.fn(conn)
                    engine.finish_job()
                except Exception as exc:
                    engine.end(commit=False)
                    outcomes.append((job, None, self._translate(exc)))
                else:
                    engine.end(commit=True)
                    self._full = False
                    outcomes.append((job, result, None))
                self._loop_deliver(selected + outcomes)
                return
            # each job in a savepoint of its own; the commit ends the last one
            for job in batch:
                try:
                    engine.start_job(job.fence)
                    result = job.fn(conn)
                    engine.finish_job()
                except Exception as exc:  # the job's own error goes back to its caller
                    if engine.batch_undone():  # the whole batch was undone (disk full)
                        raise _BatchRolledBack(exc) from exc
                    engine.undo_job()
                    outcomes.append((job, None, self._translate(exc)))
                else:
                    outcomes.append((job, result, None))
            engine.end(commit=True)
            self._full = False
        except Exception as exc:
            error = self._batch_failed(exc.cause if isinstance(exc, _BatchRolledBack) else exc)
            outcomes = [(job, None, error) for job in batch]
        self._loop_deliver(selected + outcomes)

    def _run_selects(
        self, batch: list[_Pending], outcomes: list[tuple[_Pending, Any, BaseException | None]]
    ) -> list[_Pending]:
        """Answer the batch's declared reads together where the engine can (their outcomes
        go to ``outcomes``); the jobs left to run."""
        selects = [(job, job.fn) for job in batch if isinstance(job.fn, Select)]
        if len(selects) < 2:
            return batch
        try:
            answers = self.engine.select_together(
                [(job.fence, select.statements) for job, select in selects]
            )
        except Exception as exc:  # each read runs as a job, and meets its own error
            if not self.engine.usable():
                raise
            log.debug("reads sent together failed, each runs alone: %r", exc)
            return batch
        if answers is None:
            return batch
        for (job, select), answer in zip(selects, answers, strict=True):
            if isinstance(answer, StaleClaim):
                outcomes.append((job, None, answer))
                continue
            try:
                outcomes.append((job, select.parse(answer), None))
            except Exception as exc:
                outcomes.append((job, None, self._translate(exc)))
        answered = {id(job) for job, _ in selects}
        return [job for job in batch if id(job) not in answered]

    def _batch_failed(self, exc: Exception) -> BaseException:
        """The error every job of a failed transaction gets (after rolling it back). Never
        raises: a writer thread that died would leave every later ``run`` waiting forever."""
        with contextlib.suppress(Exception):
            self.engine.end(commit=False)
        if self.engine.is_engine_error(exc) or isinstance(exc, StoreError):
            error = self._translate(exc)
        else:  # a job's own error after the engine undid the whole transaction
            log.error("store transaction undone by a job's error: %r", exc)
            error = StoreError(f"the transaction was undone: {exc!r}")
            error.__cause__ = exc
            return error
        if isinstance(error, StorageFullError):  # said with advice by the runtime
            if not self._full:  # once per outage: every write fails until space is freed
                log.warning("store transaction failed: %s", error)
            self._full = True
        else:
            log.error("store transaction failed: %s", error)
        return error

    def _translate(self, exc: BaseException) -> BaseException:
        if self.engine.is_engine_error(exc):
            return self.engine.translate(exc)
        return exc

    def _loop_deliver(self, outcomes: list[tuple[_Pending, Any, BaseException | None]]) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(_deliver, outcomes)


def _deliver(outcomes: list[tuple[_Pending, Any, BaseException | None]]) -> None:
    for job, result, error in outcomes:
        if job.future.done():  # the caller gave up (cancelled); the write still happened
            continue
        if error is not None:
            job.future.set_exception(error)
        else:
            job.future.set_result(result)
