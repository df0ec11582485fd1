"""How long records of finished work are kept, and deleting the older ones in small steps.

A gateway runs for months; without pruning the outbox, the audit log, usage rows and the
rest would grow for ever. Each repository has a ``prune(before)`` that deletes its finished
rows older than a point in time; :meth:`gateway.store.Store.prune` runs them all.

Deletes go in batches, each its own transaction: the store has one writer thread, so the
first prune of a database that has grown for a year must not hold up inbound messages while
it deletes a hundred thousand rows at once. Old rows come first in rowid order (rows are
inserted in time order), so each batch finds its rows without an index on the time column.
On PostgreSQL the physical row id is ``ctid`` (:attr:`~gateway.store.engine.sql.Dialect.rowid`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gateway.store.engine.db import Database
from gateway.store.engine.sql import Connection

DAY = 86_400.0
BATCH = 2_000


@dataclass(frozen=True, slots=True)
class Retention:
    """Seconds each kind of record is kept once its work is finished."""

    # Finished inbound messages: the dedup window, far beyond every platform's redelivery.
    journal: float = 7 * DAY
    # Sent/failed outbox rows, the tool ledger, finished turns, background tasks, done jobs,
    # decided pairing requests and turn traces.
    records: float = 30 * DAY
    audit: float = 180 * DAY
    usage: float = 90 * DAY  # the status page shows 30 days, budgets need today


async def delete_batched(
    db: Database, table: str, where: str, params: Sequence[object], *, batch: int = BATCH
) -> int:
    """``DELETE FROM table WHERE where`` in batches of ``batch`` rows; returns the count.

    ``table`` and ``where`` are constants of the calling module; values are bound.
    """
    rowid = db.dialect.rowid
    statement = (
        f"DELETE FROM {table} WHERE {rowid} IN"
        f" (SELECT {rowid} FROM {table} WHERE {where} LIMIT {int(batch)})"
    )

    def delete(conn: Connection) -> int:
        return conn.execute(statement, tuple(params)).rowcount

    total = 0
    while True:
        removed = await db.run(delete)
        total += removed
        if removed < batch:
            return total
