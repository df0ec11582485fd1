"""One simple query on a psycopg connection, below its cursors.

A store job's statements are trivial for the server (a primary-key read, a one-row insert);
what a turn costs the node on PostgreSQL is mostly what the client does per query. psycopg's
cursor machinery (its prepare manager, query conversion, per-cursor state) cost about 60 µs
of this process's CPU per query on a 2-core machine, three times the round trip itself.
Here the statements are bound on the client with the connection's own adapters
(``Transformer.as_literal``, as psycopg's ``ClientCursor`` binds them), sent as one simple
query with libpq, waited for with psycopg's waiting functions (the socket, the GIL released),
and their rows loaded by the same transformer; errors are psycopg's own classes
(``psycopg.errors.error_from_result``), so callers handle them as before. The connection
itself stays a ``psycopg.Connection`` for everything else (``PREPARE``, ``ROLLBACK``,
migrations).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Any

import psycopg
from psycopg import errors, generators, pq
from psycopg.adapt import Transformer

from gateway.store.engine.sql import placeholder_pieces

ENCODING = "utf-8"  # the client_encoding PostgresEngine.open sets

_TUPLES_OK = pq.ExecStatus.TUPLES_OK
_COMMAND_OK = pq.ExecStatus.COMMAND_OK
_EMPTY_QUERY = pq.ExecStatus.EMPTY_QUERY
_FATAL_ERROR = pq.ExecStatus.FATAL_ERROR


@lru_cache(maxsize=2048)
def _encoded_pieces(sql: str) -> tuple[bytes, ...]:
    return tuple(piece.encode(ENCODING) for piece in placeholder_pieces(sql))


class Rows:
    """One statement's result: its rows (tuples) and the rows it changed
    (:class:`~gateway.store.engine.sql.Cursor`)."""

    __slots__ = ("_at", "_rows", "rowcount")

    def __init__(self, rows: list[tuple[Any, ...]], rowcount: int) -> None:
        self._rows = rows
        self._at = 0
        self.rowcount = rowcount

    def fetchone(self) -> Any:
        if self._at >= len(self._rows):
            return None
        self._at += 1
        return self._rows[self._at - 1]

    def fetchall(self) -> list[Any]:
        rest = self._rows[self._at :]
        self._at = len(self._rows)
        return rest

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


NO_ROWS_CHANGED = -1  # a result that is no count of rows (BEGIN, SET, COMMIT)


class Wire:
    """Simple queries of several statements on ``raw``, each statement's result returned."""

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self._raw = raw
        self._transformer = Transformer.from_context(raw)

    def statement(self, sql: str, values: Sequence[Any]) -> bytes:
        """``sql`` (``?`` placeholders) with ``values`` bound as literals."""
        pieces = _encoded_pieces(sql)
        if len(pieces) != len(values) + 1:
            raise psycopg.ProgrammingError(
                f"the statement has {len(pieces) - 1} placeholders but {len(values)} values"
            )
        if not values:
            return pieces[0]
        literal = self._transformer.as_literal
        parts = [pieces[0]]
        for value, piece in zip(values, pieces[1:], strict=True):
            parts.append(literal(value))
            parts.append(piece)
        return b"".join(parts)

    def query(self, statements: Sequence[bytes]) -> list[Rows]:
        """Send ``statements`` as one query; one :class:`Rows` per statement, or the error of
        the first that failed (the server runs none after it)."""
        pgconn = self._raw.pgconn
        pgconn.send_query(b"; ".join(statements))
        results = self._raw.wait(generators.execute(pgconn))
        out: list[Rows] = []
        for result in results:
            status = result.status
            if status == _TUPLES_OK:
                self._transformer.set_pgresult(result)
                out.append(
                    Rows(self._transformer.load_rows(0, result.ntuples, tuple), result.ntuples)
                )
            elif status in (_COMMAND_OK, _EMPTY_QUERY):
                changed = result.command_tuples
                out.append(Rows([], NO_ROWS_CHANGED if changed is None else changed))
            elif status == _FATAL_ERROR:
                raise errors.error_from_result(result, encoding=ENCODING)
            else:
                raise errors.InternalError(
                    f"unexpected result of a store query: {pq.ExecStatus(status).name}"
                )
        if len(out) != len(statements):
            raise errors.InternalError(f"{len(statements)} statements sent, {len(out)} results")
        return out
