"""Making the vectors of committed messages, in the background.

A turn's commit queues its searchable messages (gateway/store/recall.py); this takes them
off the queue a batch at a time, embeds them on a worker thread (or asks the endpoint) and
stores the vectors and the batch's removal from the queue in one transaction. So the turn
never waits for it, a crash loses no message (a batch not stored is still queued and is
done again) and doubles none (a message's vector is stored once). It runs on one process:
the gateway, or a cluster's leader. With ``memory.embeddings = "off"`` it only empties the
queue; a model chosen later queues every message again (:meth:`Recall.use_model`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from agent.recall.embedders import Embedder
from gateway.core.lifecycle import Service, waited
from gateway.store import Recall
from gateway.store.history import without_guidance

log = logging.getLogger(__name__)

BATCH = 64
POLL_SECONDS = 5.0  # another node's commits (a cluster) are found at least this often
GATHER_SECONDS = 1.0  # after a commit, wait this long: the turns of a busy second, one batch
RETRY_SECONDS = (5.0, 30.0, 300.0)  # after a failing model: waits, the last repeated


class RecallIndexer(Service):
    def __init__(
        self,
        recall: Recall,
        embedder: Embedder | None,
        *,
        batch: int = BATCH,
        gather: float = GATHER_SECONDS,
    ) -> None:
        self._recall = recall
        self._embedder = embedder
        self._batch = batch
        self._gather = gather
        self._hurry = False  # someone waits (idle): no gathering
        self._wake = asyncio.Event()
        self._rounds = asyncio.Condition()  # notified after each round of the loop
        self._task: asyncio.Task[None] | None = None
        self.failures = 0  # in a row; reset by a batch stored

    @property
    def model(self) -> str:
        return self._embedder.name if self._embedder is not None else ""

    async def start(self) -> None:
        await self._recall.use_model(self.model)
        self._task = asyncio.create_task(self._run(), name="recall-indexer")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def kick(self) -> None:
        """Messages were committed: index them now rather than at the next poll."""
        self._wake.set()

    async def idle(self) -> None:
        """Return once no committed message waits for its vector (bound it with
        ``asyncio.timeout``): for tests and benchmarks."""
        async with self._rounds:
            while await self._recall.backlog():
                self._hurry = True
                self.kick()
                await self._rounds.wait()
            self._hurry = False

    async def _run(self) -> None:
        while True:
            try:
                done = await self.index_batch()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a model down, the store away: try again later
                self.failures += 1
                wait = RETRY_SECONDS[min(self.failures, len(RETRY_SECONDS)) - 1]
                log.warning("indexing past messages failed (again in %.0fs): %s", wait, exc)
                await self._round()
                await self._sleep(wait)
                continue
            await self._round()
            if done < self._batch:
                await self._sleep(POLL_SECONDS)

    async def _round(self) -> None:
        async with self._rounds:
            self._rounds.notify_all()

    async def _sleep(self, seconds: float) -> None:
        self._wake.clear()
        if await waited(self._wake.wait(), seconds) and not self._hurry:
            await asyncio.sleep(self._gather)  # woken by a commit: the next ones join its batch

    async def index_batch(self) -> int:
        """Embed and store the oldest queued messages; how many were taken off the queue."""
        batch = await self._recall.queued(self._batch)
        if not batch:
            return 0
        ids = [said.message_id for said in batch]
        if self._embedder is None:
            await self._recall.store_vectors("", [], ids)
            return len(batch)
        vectors = await self._embedder.embed([without_guidance(s.text) for s in batch])
        await self._recall.store_vectors(
            self.model, [(s, v.tobytes()) for s, v in zip(batch, vectors, strict=True)], ids
        )
        self.failures = 0
        return len(batch)
