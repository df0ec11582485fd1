"""Benchmark: memory_search over past conversations, its quality, speed and indexing cost.

Run from the repository root: ``python -m bench.recall [--messages 100000] [--postgres URL]``.

1. Quality: the labelled set of tests/recall_cases.py (questions in other words than what
   was said, among small talk), recall@5 by meaning and words fused (the built-in model) and
   by words alone.
2. Indexing: one person's ``--messages`` past messages (sentences made from the labelled
   set's, with other names, places and numbers) stored as committed turns store them, then
   embedded and stored by the indexer: CPU per message (all threads) and wall time.
3. Search: the labelled questions asked over all of them, each as ``memory_search`` does it
   (the visible sessions, words, meaning, fusion, the messages' texts): time per search,
   the first one after a start (it reads every vector) apart.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from agent.memory import recall_scope
from agent.recall.embedders import BuiltinEmbedder
from agent.recall.indexer import RecallIndexer
from agent.recall.search import Recaller, visible_sessions
from gateway.core.messages import ChatRef
from gateway.core.principal import Principal
from gateway.store import Store
from gateway.store.engine.sql import Connection
from tests.recall_cases import CASES, SMALL_TALK, load, recall_at

PERSON = Principal("telegram", "42", "Ann")
CHAT = ChatRef("telegram", "42")
SESSION = "telegram:42"
NAMES = ("Marco", "Lena", "Tom", "Aiko", "Sven", "Priya", "Omar", "Jo", "Ines", "Karl")
PLACES = ("the shed", "the attic", "the office", "the garage", "the car", "the cellar")


def sentences(count: int, seed: int = 7) -> list[str]:
    """``count`` messages varied from the labelled set's sentences."""
    rng = random.Random(seed)
    base = [said for said, _ in CASES] + list(SMALL_TALK)
    out = []
    for _ in range(count):
        words = rng.choice(base).split()
        for i, word in enumerate(words):
            if word.isdigit() or word[:1].isdigit():
                words[i] = str(rng.randint(1, 9999))
            elif word[:1].isupper() and i and rng.random() < 0.5:
                words[i] = rng.choice(NAMES)
        if rng.random() < 0.3:
            words += ["near", rng.choice(PLACES)]
        out.append(" ".join(words))
    return out


async def fill(store: Store, count: int) -> None:
    """``count`` final messages of the person's direct chat, made searchable and queued as
    a commit does (in bulk: setting up is not what is measured)."""
    scope = recall_scope("main", PERSON, CHAT).key
    texts = sentences(count)
    now = time.time()

    def insert(rows: list[tuple[int, str]]) -> None:
        def job(conn: Connection) -> None:
            for offset, text in rows:
                role = "user" if offset % 2 == 0 else "assistant"
                body = json.dumps({"role": role, "content": text})
                (message_id,) = conn.execute(
                    "INSERT INTO messages (session_key, generation, turn_id, status, role, body,"
                    " tokens, created_at) VALUES (?, 0, ?, 'final', ?, ?, 0, ?) RETURNING id",
                    (SESSION, f"bulk-{offset // 2}", role, body, now - (count - offset) * 60),
                ).fetchone()
                conn.execute(
                    "INSERT INTO messages_fts (content, session_key, message_id) VALUES (?, ?, ?)",
                    (text, SESSION, message_id),
                )
                conn.execute("INSERT INTO recall_queue (message_id) VALUES (?)", (message_id,))

        return job  # type: ignore[return-value]

    for start in range(0, count, 2_000):
        chunk = list(enumerate(texts[start : start + 2_000], start=start))
        await store.db.run(insert(chunk))  # type: ignore[arg-type]
    await store.db.run(
        lambda conn: conn.execute(
            "INSERT INTO sessions (session_key, last_active, scope) VALUES (?, ?, ?)"
            " ON CONFLICT (session_key) DO UPDATE SET scope = excluded.scope",
            (SESSION, now, scope),
        )
    )


async def quality(path: Path, url: str | None) -> tuple[float, float]:
    embedder = BuiltinEmbedder()
    async with Store(path, url=url) as store:
        expected = await load(store)
        indexer = RecallIndexer(store.recall, embedder)
        await indexer.start()
        await indexer.idle()
        await indexer.stop()
        fused = await recall_at(Recaller(store.recall, embedder), expected, ["t:ann"])
        words = await recall_at(Recaller(store.recall, None), expected, ["t:ann"])
    return fused, words


async def scale(path: Path, url: str | None, count: int) -> None:
    embedder = BuiltinEmbedder()
    await asyncio.to_thread(embedder.load)
    async with Store(path, url=url) as store:
        await fill(store, count)
        indexer = RecallIndexer(store.recall, embedder, batch=256)
        cpu, wall = time.process_time(), time.perf_counter()
        await indexer.start()
        await indexer.idle()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        await indexer.stop()
        print(f"Indexing {count:,} messages: {1e6 * cpu / count:.0f} us of CPU per message")
        print(f"  (all threads: embedding and the store), {wall:.1f} s in all")
        recaller = Recaller(store.recall, embedder)
        sessions = await visible_sessions(
            store.recall, agent="main", principal=PERSON, chat=CHAT, session_key=SESSION
        )
        questions = [question for _, question in CASES]
        start = time.perf_counter()
        await recaller.search(questions[0], sessions=sessions)
        first = time.perf_counter() - start
        timings = []
        for question in questions * 3:
            start = time.perf_counter()
            await recaller.search(question, sessions=sessions)
            timings.append(time.perf_counter() - start)
        timings.sort()
        vectors = recaller.vectors
        held = 0 if vectors is None else len(vectors)
        print(f"Search over {count:,} messages ({held:,} vectors held), {len(timings)} searches:")
        print(
            f"  median {1e3 * statistics.median(timings):.1f} ms, "
            f"p95 {1e3 * timings[int(len(timings) * 0.95)]:.1f} ms, "
            f"max {1e3 * timings[-1]:.1f} ms; the first after a start {1e3 * first:.0f} ms"
        )


async def run(count: int, url: str | None) -> None:
    with tempfile.TemporaryDirectory(prefix="switchboard-recall-") as tmp:
        fused, words = await quality(Path(tmp) / "quality.db", url)
        print(f"Labelled set: {len(CASES)} questions among {len(SMALL_TALK)} other turns")
        print(f"  recall@5 by words and meaning (built-in model): {fused:.2f}")
        print(f"  recall@5 by words only:                         {words:.2f}")
    if url is not None:
        await _empty(url)
    with tempfile.TemporaryDirectory(prefix="switchboard-recall-") as tmp:
        await scale(Path(tmp) / "scale.db", url, count)


async def _empty(url: str) -> None:
    """The PostgreSQL database emptied of what the quality run left."""
    async with Store(Path("unused"), url=url) as store:
        await store.db.run(
            lambda conn: conn.execute(
                "TRUNCATE messages, messages_fts, recall_queue, recall_vectors, sessions"
            )
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--postgres", help="an empty PostgreSQL database's URL (default: SQLite)")
    args = parser.parse_args()
    asyncio.run(run(args.messages, args.postgres))


if __name__ == "__main__":
    main()
