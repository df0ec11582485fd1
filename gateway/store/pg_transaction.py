"""PostgreSQL transactions that cost round trips only where they must.

Every query sent to the server is a round trip: tens of microseconds of this process's CPU
(psycopg) and as much of the server's, which is most of what a turn costs on PostgreSQL
beyond SQLite (docs/performance.md). The plumbing of a batch of jobs
(gateway/store/db.py) used to be round trips of its own: ``BEGIN``, a savepoint per job,
the check of each job's claim (gateway/store/fencing.py), each ``NOTIFY``, and a ``COMMIT``
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
* ``NOTIFY`` waits for the ``COMMIT`` and goes with it (PostgreSQL delivers notifications at
  commit anyway), each topic and payload once per transaction.

Errors keep their owner: a statement's error is its job's (the job's savepoint is rolled
back, :meth:`LazyTransaction.undo_job`); an error in what goes with the ``COMMIT`` fails the
whole batch, which is then rolled back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import psycopg

from gateway.core.errors import StoreError
from gateway.store.fencing import CHECK_STATEMENT, Fence, verify
from gateway.store.sql import to_format_style

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


class LazyTransaction:
    """The transaction of one batch of jobs on one psycopg connection (client-side
    binding, autocommit), sent piggyback; see the module docstring."""

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self._raw = raw
        self._begin: list[str] = []  # what opens the batch's transaction, not yet sent
        self._open = False  # the server has the batch's transaction open
        self._savepoints = False  # each job in a savepoint of its own (a batch of several)
        self._held = False  # a savepoint named "job" exists on the server
        self._job_savepoint = False  # ... and it is the current job's
        self._fence: Fence | None = None  # the claim the current job runs under
        self._checked = False  # the current job's claim was checked
        self._locked: set[Fence] = set()  # claims share-locked in the open transaction
        self._job_locked: Fence | None = None  # ... of them, by the current job
        self._notices: list[tuple[str, str]] = []  # NOTIFYs for the commit
        self._job_notices = 0  # where the current job's NOTIFYs start

    # -- the batch, driven by the engine ------------------------------------------------

    def begin(self, *, relaxed: bool, savepoints: bool) -> None:
        """A new batch; ``relaxed``: its commit need not wait for the disk."""
        self._forget()
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
        if self._job_savepoint:
            self._raw.execute("ROLLBACK TO SAVEPOINT job")
            if self._job_locked is not None:  # its share lock went with the savepoint
                self._locked.discard(self._job_locked)

    def end(self, commit: bool) -> None:
        """Commit the batch (with its NOTIFYs), or roll it back."""
        try:
            status = self._raw.info.transaction_status
            if not commit:
                if status != _IDLE:
                    self._raw.execute("ROLLBACK")
                return
            if status == _INERROR:
                # PostgreSQL would answer COMMIT with a silent ROLLBACK: say it failed
                self._raw.execute("ROLLBACK")
                raise StoreError("the transaction failed and was rolled back")
            statements: list[str] = []
            values: list[str] = []
            for topic, payload in dict.fromkeys(self._notices):
                statements.append("SELECT pg_notify(%s, %s)")
                values += (topic, payload)
            if status != _IDLE:
                statements.append("COMMIT")
            if statements:
                self._raw.cursor().execute("; ".join(statements), values)
        finally:
            self._forget()

    def batch_undone(self) -> bool:
        """Whether the server ended the batch's transaction by itself."""
        return self._open and self._raw.info.transaction_status == _IDLE

    # -- statements, from the jobs ------------------------------------------------------

    def notify(self, topic: str, payload: str) -> None:
        self._notices.append((topic, payload))

    def execute(self, sql: str, params: Sequence[Any]) -> psycopg.Cursor[Any]:
        statements, values, check = self._ahead(sql)
        statements.append(to_format_style(sql))
        values += [clean(v) for v in params]
        return self._send(statements, values, check)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> psycopg.Cursor[Any]:
        values_of_rows = [[clean(v) for v in row] for row in rows]
        if not values_of_rows:  # nothing to send, not even what would go ahead
            return self._raw.cursor()
        statements, values, check = self._ahead(sql)
        if statements:  # what goes ahead cannot share a query with a batch of rows
            self._send(statements, values, check)
        cursor = self._raw.cursor()
        cursor.executemany(to_format_style(sql), values_of_rows)
        return cursor

    def _ahead(self, sql: str) -> tuple[list[str], list[Any], int | None]:
        """What must run before ``sql``: the transaction and the job's savepoint, and the
        claim check (``check``: its index among the statements)."""
        statements: list[str] = []
        values: list[Any] = []
        check: int | None = None
        fence = self._fence
        if self._open or not is_plain_read(sql):
            if not self._open and self._begin:
                statements += self._begin
                self._open = True
            if self._open and self._savepoints and not self._job_savepoint:
                if self._held:
                    statements.append("RELEASE SAVEPOINT job")
                statements.append("SAVEPOINT job")
                self._held = self._job_savepoint = True
            if fence is not None and fence not in self._locked:
                check = len(statements)
                statements.append(to_format_style(CHECK_STATEMENT + " FOR SHARE"))
                values.append(fence.session_key)
                self._locked.add(fence)
                self._job_locked = fence
                self._checked = True
        elif fence is not None and not self._checked:
            check = 0
            statements.append(to_format_style(CHECK_STATEMENT))
            values.append(fence.session_key)
            self._checked = True
        return statements, values, check

    def _send(
        self, statements: list[str], values: list[Any], check: int | None
    ) -> psycopg.Cursor[Any]:
        cursor = self._raw.cursor()
        try:
            cursor.execute("; ".join(statements), values)
        except BaseException:
            self._open = self._raw.info.transaction_status != _IDLE
            raise
        last = len(statements) - 1
        for index in range(last + 1):  # on to the last statement's result
            if index == check:
                assert self._fence is not None
                verify(self._fence, cursor.fetchone())
            if index < last:
                cursor.nextset()
        return cursor

    def _forget(self) -> None:
        self._begin = []
        self._open = self._savepoints = self._held = self._job_savepoint = False
        self._fence = self._job_locked = None
        self._checked = False
        self._locked.clear()
        self._notices.clear()
        self._job_notices = 0
