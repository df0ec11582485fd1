"""Fencing tokens: a node that lost a session's claim cannot write for it.

In a cluster a session is run by the node holding its advisory lock
(gateway/runtime/cluster/work.py). The lock lives on the node's membership connection, and
the server drops it the moment that connection ends, which can happen while the node lives
(``pg_terminate_backend``, a proxy cutting it): the node notices only at its next heartbeat.
Without a fence another node could take the session and resume its turn meanwhile, and the
two could both run a tool call.

So every claim bumps the session's **epoch** (``session_claims``, :func:`claim_statement`,
in the transaction that loads what the session has open), and every store job a turn runs
carries the claim it runs under (:data:`FENCE`, set by the dispatcher around the turn and
inherited by the tasks the turn starts, its draft edits included). The writer checks the
epoch in the job's own transaction (:func:`check_statement`): ``SELECT … FOR SHARE`` of the
claim's row, which the next claim's ``UPDATE`` must wait for. Either the stale write commits
before the new claim's transaction reads the session (which then sees it: a side effect
recorded as started is never repeated), or it is refused with
:class:`~gateway.core.errors.StaleClaim`. Reads are refused the same way (without the
share lock: they write nothing), which stops a stale turn early. On PostgreSQL the check
travels in the query of the job's first statement (gateway/store/engine/pg_transaction.py).

One process (SQLite) never sets a fence: nobody else can take its sessions.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass

from gateway.core.errors import StaleClaim
from gateway.store.engine.sql import Connection, Cursor, Statement


@dataclass(frozen=True, slots=True)
class Fence:
    """The claim a turn runs under: its session and the epoch of that claim."""

    session_key: str
    epoch: int


# the claim of the turn whose work this is (None: no fence, e.g. one process, housekeeping)
FENCE: contextvars.ContextVar[Fence | None] = contextvars.ContextVar("fence", default=None)


def claim_statement(session_key: str, node: str, now: float) -> Statement:
    """What claims ``session_key`` for ``node``: it bumps the epoch and returns the new one
    (:func:`claimed_epoch`). The row lock of the ``UPDATE`` waits for every write checked
    against the old epoch."""
    return (
        "INSERT INTO session_claims (session_key, epoch, node, claimed_at) VALUES (?, 1, ?, ?)"
        " ON CONFLICT (session_key) DO UPDATE SET epoch = session_claims.epoch + 1,"
        " node = excluded.node, claimed_at = excluded.claimed_at RETURNING epoch",
        (session_key, node, now),
    )


def claimed_epoch(cursor: Cursor) -> int:
    """The new epoch, from the cursor of :func:`claim_statement`."""
    return int(cursor.fetchone()[0])


CHECK_STATEMENT = "SELECT epoch FROM session_claims WHERE session_key = ?"


def check_statement(conn: Connection, fence: Fence) -> None:
    """Refuse (:class:`StaleClaim`) unless ``fence`` is the session's current claim; on
    PostgreSQL the row stays share-locked until the transaction ends, so no claim can slip
    in between the check and the commit."""
    lock = " FOR SHARE" if conn.dialect.name == "postgresql" else ""
    verify(fence, conn.execute(CHECK_STATEMENT + lock, (fence.session_key,)).fetchone())


def verify(fence: Fence, row: tuple[int] | None) -> None:
    """Refuse (:class:`StaleClaim`) unless ``row``, what :data:`CHECK_STATEMENT` returned,
    is ``fence``'s epoch."""
    if row is None or int(row[0]) != fence.epoch:
        current = "none" if row is None else row[0]
        raise StaleClaim(
            f"session {fence.session_key} was claimed by another node"
            f" (epoch {current}, this node's {fence.epoch}): its write is refused"
        )
