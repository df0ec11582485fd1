"""The stored vectors of past messages, held in memory for searching by meaning.

Vectors live in the journal's database (``recall_vectors``, shared by a cluster's nodes);
each process keeps a copy as one float32 matrix, brought up to date before each search by
reading the rows stored after the last one it has (``seq``: the order they were stored in,
by the one indexer). A search scores every row at once (a matrix-vector product: about 5 ms
for 100,000 messages of 256 dimensions) and keeps the best rows of the sessions it may see.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.store import Recall, StoredVector

if TYPE_CHECKING:
    from agent.recall.embedders import Vectors

PAGE = 5_000  # vectors read per store job (the first search after a start reads them all)


@dataclass(frozen=True, slots=True)
class Near:
    message_id: int
    score: float  # cosine similarity


class VectorIndex:
    def __init__(self, recall: Recall, model: str) -> None:
        import numpy as np  # noqa: PLC0415 - only when recall by meaning is on

        self._np = np
        self._recall = recall
        self.model = model
        self._seq = 0
        self._count = 0
        self._ids: Any = np.zeros(0, dtype=np.int64)
        self._sessions: Any = np.zeros(0, dtype=np.int32)
        self._matrix: Any = None  # (capacity, dims) float32
        self._session_numbers: dict[str, int] = {}
        self._lock = asyncio.Lock()

    def __len__(self) -> int:
        return self._count

    async def refresh(self) -> None:
        """Take in the vectors stored since the last refresh."""
        async with self._lock:
            while True:
                rows = await self._recall.vectors_after(self._seq, self.model, PAGE)
                if rows:
                    self._append(rows)
                if len(rows) < PAGE:
                    return

    def _append(self, rows: list[StoredVector]) -> None:
        np = self._np
        block = np.frombuffer(b"".join(r.vector for r in rows), dtype=np.float32)
        block = block.reshape(len(rows), -1)
        need = self._count + len(rows)
        if self._matrix is None or need > len(self._matrix):  # room for twice as many
            capacity = max(1_024, need, 0 if self._matrix is None else 2 * len(self._matrix))
            matrix = np.zeros((capacity, block.shape[1]), dtype=np.float32)
            if self._matrix is not None:
                matrix[: self._count] = self._matrix[: self._count]
            self._matrix = matrix
            self._ids = np.resize(self._ids, capacity)
            self._sessions = np.resize(self._sessions, capacity)
        span = slice(self._count, need)
        self._matrix[span] = block
        self._ids[span] = [r.message_id for r in rows]
        self._sessions[span] = [self._number(r.session_key) for r in rows]
        self._count = need
        self._seq = rows[-1].seq

    def _number(self, session_key: str) -> int:
        number = self._session_numbers.get(session_key)
        if number is None:
            number = self._session_numbers[session_key] = len(self._session_numbers)
        return number

    def nearest(self, query: Vectors, sessions: Collection[str], limit: int) -> list[Near]:
        """The ``limit`` messages of ``sessions`` most like ``query`` (a unit vector), best
        first."""
        np = self._np
        numbers = [self._session_numbers[s] for s in sessions if s in self._session_numbers]
        if not numbers or self._matrix is None:
            return []
        count = self._count
        scores = self._matrix[:count] @ query.reshape(-1)
        if len(numbers) < len(self._session_numbers):  # not every session: mask the others
            allowed = np.zeros(len(self._session_numbers), dtype=bool)
            allowed[numbers] = True
            mask = allowed[self._sessions[:count]]
            scores[~mask] = -np.inf
            count = int(mask.sum())
        found = min(limit, count)
        if found == 0:
            return []
        best = np.argpartition(scores, len(scores) - found)[len(scores) - found :]
        best = best[np.argsort(-scores[best], kind="stable")]
        return [Near(int(self._ids[i]), float(scores[i])) for i in best]
