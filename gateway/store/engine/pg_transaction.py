"""PostgreSQL transactions that cost round trips only where they must.

Every query sent to the server is a round trip: tens of microseconds of this process's CPU
(psycopg) and as much of the server's, which is most of what a turn costs on PostgreSQL
beyond SQLite (docs/performance.md). The plumbing of a batch of jobs
(gateway/store/engine/db.py) used to be round trips of its own: ``BEGIN``, a savepoint per job,
the check of each job's claim (gateway/store/cluster/fencing.py), each ``NOTIFY``, and a ``COMMIT``
even for a batch that only read. Here it rides along with the statements that need it:

* ``BEGIN`` (with ``SET LOCAL synchronous_commit``), the job's ``SAVEPOINT`` and the claim's
  ``SELECT … FOR SHARE`` are sent in front of the job's first statement that needs the
  transaction, in one simple query (the connection binds parameters on the client, so
  several statements may go in one query);
* plain reads before the batch's first write run without a transaction: under READ
  COMMITTED each statement sees its own snapshot inside a transaction too, and a plain
  ``SELECT`` holds nothing until commit, so nothing changes but the cost. A batch that only
  reads sends neither ``BEGIN`` nor ``COMMIT``; a job's claim is still checked in the query
  of its first read;
* a write nobody waits for (``INSERT``, ``UPDATE``, ``DELETE`` without ``RETURNING``) is
  queued and goes with the job's next query, or with the ``COMMIT`` when the job is alone in
  its batch; asking for its ``rowcount`` sends it at once (:class:`WriteResult`);
* ``NOTIFY`` waits for the ``COMMIT`` and goes with it (PostgreSQL delivers notifications at
  commit anyway), each topic and payload once per transaction;
* a statement sent twice is prepared (``PREPARE``) on the connection (between batches, each on its
  own) and sent as ``EXECUTE`` from then on: the server parses and plans it once. One the
  server cannot prepare (a parameter of no known type: ``? IS NULL``) stays text.

Errors keep their owner: a statement's error is its job's, when it runs or at the latest
when the job returns (:meth:`LazyTransaction.finish_job`), and only the job's savepoint is
rolled back (:meth:`LazyTransaction.undo_job`); a claim is verified before any write of its
transaction commits. Only an error in what goes with the ``COMMIT`` of a job alone in its
batch surfaces at the commit, which fails that job.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import psycopg

from gateway.core.errors import StaleClaim, StoreError
from gateway.store.cluster.fencing import CHECK_STATEMENT, Fence, verify
from gateway.store.engine.pg_wire import Rows, Wire
from gateway.store.engine.sql import Cursor, Statement, to_numbered_style

_IDLE = psycopg.pq.TransactionStatus.IDLE
_INERROR = psycopg.pq.TransactionStatus.INERROR

# what makes a SELECT more than a read: row locks, and functions with effects (pg_notify,
# advisory locks, settings, sequences)
_EFFECTS = re.compile(
    r"\bFOR\s+(?:UPDATE|SHARE|NO\s+KEY|KEY)\b|\b(?:pg_\w+|set_config|nextval|setval)\s*\(",
    re.IGNORECASE,
)


@lru_cache(maxsize=1024)
def is_plain_read(sql: str) -> bool:
    """Whether ``sql`` only reads: a ``SELECT`` without row locks or functions with effects
    (anything else, ``WITH`` included, is taken to write)."""
    return sql.lstrip()[:6].upper() == "SELECT" and _EFFECTS.search(sql) is None


def clean(value: Any) -> Any:
    """PostgreSQL text cannot hold NUL characters (SQLite can): store the replacement
    character instead."""
    if isinstance(value, str) and "\x00" in value:
        return value.replace("\x00", "\ufffd")
    return value


PREPARED_LIMIT = 500  # statements prepared per connection (a few dozen are in everyday use)

_RETURNING = re.compile(r"\bRETURNING\b", re.IGNORECASE)


@lru_cache(maxsize=1024)
def is_blind_write(sql: str) -> bool:
    """Whether ``sql`` writes without returning rows: an ``INSERT``, ``UPDATE`` or ``DELETE``
    without ``RETURNING``, which can wait for the next query."""
    return sql.lstrip()[:6].upper() in ("INSERT", "UPDATE", "DELETE") and not _RETURNING.search(sql)


class WriteResult:
    """The cursor of a write that waits in the queue (of each row of an ``executemany``):
    its row count sends it (and all before it) when asked for; it returns no rows."""

    def __init__(self, transaction: LazyTransaction) -> None:
        self._transaction = transaction
        self.sent_rowcount: int | None = None

    def add(self, rowcount: int) -> None:
        """A statement of this write was sent and changed ``rowcount`` rows."""
        self.sent_rowcount = max(rowcount, 0) + (self.sent_rowcount or 0)

    @property
    def rowcount(self) -> int:
        if self.sent_rowcount is None:
            self._transaction.send_queue()
        assert self.sent_rowcount is not None
        return self.sent_rowcount

    def fetchone(self) -> Any:
        return None

    def fetchall(self) -> list[Any]:
        return []

    def __iter__(self) -> Iterator[Any]:
        return iter(())


@dataclass(slots=True)
class _Queued:
    """A statement waiting to be sent with the next query."""

    text: str  # with ``?`` placeholders
    values: list[Any] = field(default_factory=list)
    fence: Fence | None = None  # a claim check: the epoch it returns is verified
    result: WriteResult | None = None  # a blind write: its row count goes here
    rows: Rows | None = None  # its result, once sent


class LazyTransaction:
    """The transaction of one batch of jobs on one psycopg connection (client-side
    binding, autocommit), sent piggyback; see the module docstring."""

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self._raw = raw
        self._wire = Wire(raw)
        self._begin: list[str] = []  # what opens the batch's transaction, not yet sent
        self._open = False  # the server has the batch's transaction open
        self._savepoints = False  # each job in a savepoint of its own (a batch of several)
        self._held = False  # a savepoint named "job" exists on the server
        self._job_savepoint = False  # ... and it is the current job's
        self._fence: Fence | None = None  # the claim the current job runs under
        self._checked = False  # the current job's claim was checked
        self._locked: set[Fence] = set()  # claims share-locked in the open transaction
        self._job_locked: Fence | None = None  # ... of them, by the current job
        self._queue: list[_Queued] = []  # statements for the next query
        # prepared statements of this connection: the server parses and plans them once
        self._executes: dict[str, str] = {}  # statement → its EXECUTE
        self._unpreparable: set[str] = set()
        self._seen: dict[str, int] = {}  # statements not prepared yet: times sent
        self._to_prepare: list[str] = []
        self._notices: list[tuple[str, str]] = []  # NOTIFYs for the commit
        self._job_notices = 0  # where the current job's NOTIFYs start

    # -- the batch, driven by the engine ------------------------------------------------

    def begin(self, *, relaxed: bool, savepoints: bool) -> None:
        """A new batch; ``relaxed``: its commit need not wait for the disk."""
        self._forget()
        if self._to_prepare:
            self._prepare_waiting()
        self._begin = ["BEGIN"]
        if relaxed:
            self._begin.append("SET LOCAL synchronous_commit = off")
        self._savepoints = savepoints

    def start_job(self, fence: Fence | None) -> None:
        """The next job of the batch starts; ``fence``: the claim it runs under."""
        self._job_savepoint = False
        self._fence = fence
        self._checked = False
        self._job_locked = None
        self._job_notices = len(self._notices)

    def undo_job(self) -> None:
        """Undo what the current job did, after its error (the batch goes on)."""
        del self._notices[self._job_notices :]
        if self._queue:  # what the job queued, then undone with it
            with contextlib.suppress(psycopg.Error, StaleClaim):
                self._flush()
        if self._job_savepoint:
            self._raw.execute("ROLLBACK TO SAVEPOINT job")
            if self._job_locked is not None:  # its share lock went with the savepoint
                self._locked.discard(self._job_locked)

    def end(self, commit: bool) -> None:
        """Commit the batch (with its NOTIFYs), or roll it back."""
        try:
            status = self._raw.info.transaction_status
            if not commit:
                self._queue = []
                if status != _IDLE:
                    self._raw.execute("ROLLBACK")
                return
            if status == _INERROR:
                # PostgreSQL would answer COMMIT with a silent ROLLBACK: say it failed
                self._raw.execute("ROLLBACK")
                raise StoreError("the transaction failed and was rolled back")
            if any(statement.fence is not None for statement in self._queue):
                self._flush()  # a claim is verified before its writes may commit
            ending = [
                _Queued("SELECT pg_notify(?, ?)", [topic, payload])
                for topic, payload in dict.fromkeys(self._notices)
            ]
            if self._open:
                ending.append(_Queued("COMMIT"))
            if self._queue or ending:
                self._flush(*ending)
        finally:
            self._forget()

    # -- statements, from the jobs ------------------------------------------------------

    def notify(self, topic: str, payload: str) -> None:
        self._notices.append((topic, payload))

    def execute(self, sql: str, params: Sequence[Any]) -> Cursor:
        self._ahead(sql)
        statement = _Queued(self._text(sql), [clean(v) for v in params])
        if is_blind_write(sql):  # nobody waits for it: it goes with the next query
            statement.result = WriteResult(self)
            self._queue.append(statement)
            return statement.result
        self._queue.append(statement)
        self._flush()
        assert statement.rows is not None
        return statement.rows

    def execute_together(self, statements: Sequence[Statement]) -> list[Cursor]:
        """``statements`` in one query (with what goes ahead of each, as :meth:`execute`
        would send it); each one's result."""
        mine: list[_Queued] = []
        for sql, params in statements:
            self._ahead(sql)
            mine.append(_Queued(self._text(sql), [clean(v) for v in params]))
            self._queue.append(mine[-1])
        if mine:
            self._flush()
        return [statement.rows for statement in mine if statement.rows is not None]  # all sent

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Cursor:
        """Each row a statement of the queue (a write nobody waits for goes with the next
        query, like :meth:`execute`'s); the returned cursor counts the rows of all."""
        values_of_rows = [[clean(v) for v in row] for row in rows]
        if not values_of_rows:  # nothing to send, not even what would go ahead
            return Rows([], 0)
        self._ahead(sql)
        text = self._text(sql)
        written = WriteResult(self)
        self._queue += [_Queued(text, values, result=written) for values in values_of_rows]
        if not is_blind_write(sql):
            self._flush()
        return written

    def select_together(
        self, selects: Sequence[tuple[Fence | None, Sequence[Statement]]]
    ) -> list[list[Cursor] | StaleClaim]:
        """The statements of several reads in one query, between batches (no transaction:
        plain reads, as a read-only batch sends them), each read's claim checked in front
        of its statements; per read its cursors, or its claim refused."""
        if self._to_prepare:
            self._prepare_waiting()
        sent: list[_Queued] = []
        spans: list[tuple[Fence | None, int, int]] = []  # the claim; where its reads start, end
        for fence, statements in selects:
            if fence is not None:
                sent.append(self._check(fence, ""))
            start = len(sent)
            sent += [
                _Queued(self._text(sql), [clean(v) for v in values]) for sql, values in statements
            ]
            spans.append((fence, start, len(sent)))
        results = self._send(sent)
        answers: list[list[Cursor] | StaleClaim] = []
        for fence, start, end in spans:
            if fence is not None:
                try:
                    verify(fence, results[start - 1].fetchone())
                except StaleClaim as refused:
                    answers.append(refused)
                    continue
            answers.append(list(results[start:end]))
        return answers

    def finish_job(self) -> None:
        """The current job returned: send what it left queued, so that an error in it (a
        stale claim too) is still the job's. A job alone in its batch leaves its writes
        for the commit, unless a claim check is among them: it must pass first."""
        if self._queue and (self._savepoints or any(statement.fence for statement in self._queue)):
            self._flush()

    def _ahead(self, sql: str) -> None:
        """Queue what must run before ``sql``: the transaction and the job's savepoint, and
        the check of the job's claim."""
        fence = self._fence
        if self._open or not is_plain_read(sql):
            if not self._open and self._begin:
                self._queue += [_Queued(text) for text in self._begin]
                self._open = True
            if self._open and self._savepoints and not self._job_savepoint:
                if self._held:
                    self._queue.append(_Queued("RELEASE SAVEPOINT job"))
                self._queue.append(_Queued("SAVEPOINT job"))
                self._held = self._job_savepoint = True
            if fence is not None and fence not in self._locked:
                self._queue.append(self._check(fence, " FOR SHARE"))
                self._locked.add(fence)
                self._job_locked = fence
                self._checked = True
        elif fence is not None and not self._checked:
            self._queue.append(self._check(fence, ""))
            self._checked = True

    def send_queue(self) -> None:
        """Send what waits in the queue now (a queued write's row count is asked for)."""
        if self._queue:
            self._flush()

    def _flush(self, *after: _Queued) -> None:
        """Send the queue (and ``after``) as one query; each statement's result goes to it."""
        queue = [*self._queue, *after]
        self._queue = []
        try:
            results = self._send(queue)
        except BaseException:
            self._open = self._raw.info.transaction_status != _IDLE
            raise
        for statement, rows in zip(queue, results, strict=True):
            statement.rows = rows
            if statement.fence is not None:
                verify(statement.fence, rows.fetchone())
            elif statement.result is not None:
                statement.result.add(rows.rowcount)

    def _send(self, queued: list[_Queued]) -> list[Rows]:
        """``queued`` bound and sent as one query; each statement's result."""
        return self._wire.query([self._wire.statement(q.text, q.values) for q in queued])

    def _check(self, fence: Fence, lock: str) -> _Queued:
        return _Queued(self._text(CHECK_STATEMENT + lock), [fence.session_key], fence)

    # -- prepared statements -------------------------------------------------------------

    def _text(self, sql: str) -> str:
        """What to send for ``sql``: ``EXECUTE`` of its prepared statement once there is
        one, its text until then (a statement seen twice is prepared before the next
        batch)."""
        executed = self._executes.get(sql)
        if executed is not None:
            return executed
        if sql not in self._unpreparable:
            if len(self._seen) > 4 * PREPARED_LIMIT:  # statements made up on the fly
                self._seen.clear()
            seen = self._seen.get(sql, 0) + 1
            if seen == 2 and len(self._executes) + len(self._to_prepare) < PREPARED_LIMIT:
                self._to_prepare.append(sql)
            self._seen[sql] = seen
        return sql

    def _prepare_waiting(self) -> None:
        """``PREPARE`` the statements seen twice, each on its own (the connection is idle,
        so one the server cannot prepare, e.g. for a parameter of no known type, fails
        alone and is sent as text from then on)."""
        waiting, self._to_prepare = self._to_prepare, []
        for sql in waiting:
            name = f"s{len(self._executes) + len(self._unpreparable) + 1}"
            text, count = to_numbered_style(sql)
            try:
                self._raw.execute(f"PREPARE {name} AS {text}")
            except psycopg.Error:
                if self._raw.broken or self._raw.info.transaction_status != _IDLE:
                    raise  # the connection's trouble, not the statement's
                self._unpreparable.add(sql)
                continue
            marks = ", ".join(["?"] * count)
            self._executes[sql] = f"EXECUTE {name}({marks})" if count else f"EXECUTE {name}"
        self._seen.clear()

    def _forget(self) -> None:
        self._begin = []
        self._open = self._savepoints = self._held = self._job_savepoint = False
        self._fence = self._job_locked = None
        self._checked = False
        self._locked.clear()
        self._queue = []
        self._notices.clear()
        self._job_notices = 0
