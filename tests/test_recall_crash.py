"""The recall index survives a crash mid-indexing: a process killed while it embeds a batch
leaves every message either stored once or still queued, and the next start finishes the
rest, with no message left out and none stored twice (both engines). And a cluster's nodes
share the vectors: what one indexed, another finds."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
from pathlib import Path

from agent.recall.embedders import BuiltinEmbedder
from agent.recall.indexer import RecallIndexer
from agent.recall.search import Recaller
from gateway.store import NewMessage, Store
from gateway.store.engine.sql import Connection
from tests.backends import StoreFactory

MESSAGES = 60
BATCH = 8

# Indexes the store with batches of BATCH, saying "embedding N" before each batch's model
# call and then waiting there forever from the third on: the test kills it at that point.
CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from agent.recall.embedders import BuiltinEmbedder
    from agent.recall.indexer import RecallIndexer
    from gateway.store import Store

    class Stalling(BuiltinEmbedder):
        calls = 0

        async def embed(self, texts):
            Stalling.calls += 1
            print(f"embedding {Stalling.calls}", flush=True)
            if Stalling.calls >= 3:
                await asyncio.Event().wait()  # killed here
            return await super().embed(texts)

    async def main():
        store = Store(Path(sys.argv[1]), url=sys.argv[2] or None)
        await store.start()
        indexer = RecallIndexer(store.recall, Stalling(), batch=BATCH)
        await indexer.start()
        await asyncio.Event().wait()

    asyncio.run(main())
    """
).replace("BATCH", str(BATCH))


async def history(store: Store) -> None:
    for turn in range(MESSAGES // 2):
        await store.journal.start_turn(f"turn-{turn}", "t:ann", "chat", [])
        await store.history.add_checkpoints(
            "t:ann",
            f"turn-{turn}",
            [
                NewMessage("user", {"role": "user", "content": f"question number {turn}"}),
                NewMessage("assistant", {"role": "assistant", "content": f"answer {turn}"}),
            ],
        )
        await store.commit_turn(turn_id=f"turn-{turn}", session_key="t:ann", replies=[])


ROOT = Path(__file__).resolve().parent.parent


async def killed_mid_batch(db_path: Path, url: str | None) -> None:
    root = ROOT
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CHILD,
        str(db_path),
        url or "",
        cwd=root,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert child.stdout is not None
    async with asyncio.timeout(60):
        while (await child.stdout.readline()).strip() != b"embedding 3":
            pass
    child.send_signal(signal.SIGKILL)
    await child.wait()


async def stored(store: Store) -> tuple[int, int, int, int]:
    def count(conn: Connection) -> tuple[int, int, int, int]:
        run = conn.execute
        (vectors,) = run("SELECT COUNT(*) FROM recall_vectors").fetchone()
        (distinct,) = run("SELECT COUNT(DISTINCT message_id) FROM recall_vectors").fetchone()
        (queued,) = run("SELECT COUNT(*) FROM recall_queue").fetchone()
        (missing,) = run(
            "SELECT COUNT(*) FROM messages_fts f WHERE NOT EXISTS"
            " (SELECT 1 FROM recall_vectors v WHERE v.message_id = f.message_id)"
        ).fetchone()
        return int(vectors), int(distinct), int(queued), int(missing)

    return await store.db.run(count)


async def test_a_crash_mid_indexing_loses_and_doubles_nothing(
    make_store: StoreFactory, store_url: str | None, tmp_path: Path
) -> None:
    async with make_store() as store:
        await history(store)
    await killed_mid_batch(tmp_path / "db.sqlite", store_url)
    async with make_store() as store:
        after_crash = await stored(store)
        indexer = RecallIndexer(store.recall, BuiltinEmbedder(), batch=BATCH)
        await indexer.start()
        try:
            async with asyncio.timeout(60):
                await indexer.idle()
        finally:
            await indexer.stop()
        finished = await stored(store)
    assert after_crash == (2 * BATCH, 2 * BATCH, MESSAGES - 2 * BATCH, MESSAGES - 2 * BATCH)
    assert finished == (MESSAGES, MESSAGES, 0, 0)


async def test_what_one_node_indexed_another_finds(pg_url: str, tmp_path: Path) -> None:
    embedder = BuiltinEmbedder()
    async with (
        Store(tmp_path / "a.sqlite", url=pg_url, node="a") as leader,
        Store(tmp_path / "b.sqlite", url=pg_url, node="b") as other,
    ):
        await history(leader)
        await leader.journal.start_turn("bike", "t:ann", "chat", [])
        said = "my bicycle is locked in the basement of Elm Street 12"
        await leader.history.add_checkpoints(
            "t:ann", "bike", [NewMessage("user", {"role": "user", "content": said})]
        )
        await leader.commit_turn(turn_id="bike", session_key="t:ann", replies=[])
        indexer = RecallIndexer(leader.recall, embedder)
        await indexer.start()
        try:
            async with asyncio.timeout(60):
                await indexer.idle()
        finally:
            await indexer.stop()
        searched = await Recaller(other.recall, embedder).search(
            "where did I leave bike", sessions=["t:ann"], limit=3
        )
    assert searched.by_meaning
    assert said in searched.found[0].text
