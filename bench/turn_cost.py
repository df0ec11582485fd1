"""Benchmark: what one ordinary turn costs in work, counted rather than timed.

Run from the repository root: ``python -m bench.turn_cost [--turns 20] [--streaming-off]
[--embeddings off] [--caps]``.

One gateway in this process with the real Telegram channel (python-telegram-bot against the
fake Bot API) and the web chat on, as shipped; the fake LLM answers each message whole (as
bench.compare's does). A person writes ``--turns`` messages in one direct chat, each after
the previous answer arrived. Counted per turn, after a warm-up turn:

* Bot API calls, by method (``getUpdates`` left out: it waits for the next message);
* store round trips (jobs handed to the store's thread) and the transactions they share;
* commits that reach the disk (``synchronous=FULL``: an fsync each) and SQL statements;
* per-turn trace files written;
* the background work of the recall indexer (memory_search's vectors, made after the
  commit): its store jobs, apart from the turn's;
* the event loop's own CPU time per turn (the main thread's; it moves with the machine's
  load, so compare runs side by side, ``--embeddings off`` against the default).
* model calls (the claims check asks the model only for languages its rules cannot read).

``--caps`` turns the money caps on (the person's, the gateway's by day and month, background
work's; the fake model priced), so the checks before each turn and the notices' look after
it are counted too. Last, the time the claims rules take per answer (a timing: it moves
with the machine).

These figures do not move with the machine's load, unlike CPU time (bench.compare), so a
change that saves work shows here exactly.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.guards.claims import claims
from bench.common import quiet_proxies, settings_for
from gateway.runtime.app import Gateway
from gateway.store.engine.sqlite import SqliteEngine
from tests.fakes.llm import FakeLLM, echo
from tests.fakes.telegram import FakeTelegram, fast_channel, random_token, section

CHAT = 42


@dataclass
class StoreCount:
    """What the store's thread did, from SQLite's statement trace and the job queue."""

    jobs: Counter[str] = field(default_factory=Counter)  # "urgent" / "normal" / "read"
    statements: int = 0
    transactions: int = 0
    durable: int = 0  # commits while synchronous=FULL
    _full: bool = True

    def statement(self, sql: str) -> None:
        text = sql.strip().upper()
        if text.startswith("PRAGMA SYNCHRONOUS="):
            self._full = text.endswith("FULL")
            return
        if text.startswith(("BEGIN", "SAVEPOINT", "RELEASE", "ROLLBACK")):
            self.transactions += text.startswith("BEGIN")
            return
        if text == "COMMIT":
            self.durable += self._full
            return
        self.statements += 1

    def read_statement(self, sql: str) -> None:
        """A statement of a read on the event loop's connection (never a disk commit)."""
        if not sql.strip().upper().startswith(("BEGIN", "COMMIT", "ROLLBACK")):
            self.statements += 1

    def snapshot(self) -> tuple[int, int, int, int, int, int]:
        return (
            self.jobs["urgent"],
            self.jobs["normal"],
            self.jobs["read"],
            self.transactions,
            self.durable,
            self.statements,
        )


def count_store(gateway: Gateway, into: StoreCount) -> None:
    """Count the store's jobs, reads and statements (a benchmark's instrument, not a
    feature)."""
    store = gateway.store
    db = store.db
    engine = db.engine
    assert isinstance(engine, SqliteEngine)
    engine.trace(into.statement, into.read_statement)
    run: Callable[..., Awaitable[Any]] = db.run
    read: Callable[..., Awaitable[Any]] = db.read

    async def counted(fn: Any, *, durable: bool = True, urgent: bool = False) -> Any:
        task = asyncio.current_task()
        if task is not None and task.get_name() == "recall-indexer":
            into.jobs["background"] += 1
        else:
            into.jobs["urgent" if urgent else "normal"] += 1
        return await run(fn, durable=durable, urgent=urgent)

    async def counted_read(fn: Any) -> Any:
        into.jobs["read"] += 1
        return await read(fn)

    db.run = counted  # type: ignore[method-assign]
    db.read = counted_read  # type: ignore[method-assign]


# a person's allowance, the gateway's and background work's: none is reached by the run
CAPS = {
    "person_daily_usd": 100.0,
    "person_monthly_usd": 1_000.0,
    "gateway_daily_usd": 100.0,
    "gateway_monthly_usd": 1_000.0,
    "background_daily_usd": 10.0,
}
PRICED = {"prices": {"fake-model": {"input": 2.5, "cached_input": 1.25, "output": 10.0}}}
# answers of every shape the claims rules meet: plain, claiming, negated, German, quoted
ANSWERS = (
    "echo: question 7",
    "The capital of France is Paris; it has been since the tenth century, more or less.",
    "Done: I've sent the email to Dana and saved the notes to notes/monday.md.",
    "I couldn't send the email: the server refused it. Shall I try again later?",
    "Ich habe die E-Mail an Dana gesendet und die Erinnerung für morgen eingerichtet.",
    "Here is a draft:\n\nSubject: Agenda\n\nHi Dana, I have sent the agenda. " * 3,
)


def claims_time(rounds: int = 2_000) -> float:
    """Microseconds the claims rules take per answer (the answers above, round robin)."""
    started = time.perf_counter()
    for index in range(rounds):
        claims(ANSWERS[index % len(ANSWERS)])
    return (time.perf_counter() - started) / rounds * 1e6


async def measure(
    turns: int, *, streaming: bool, embeddings: str = "builtin", caps: bool = False
) -> None:
    quiet_proxies()
    llm = await FakeLLM().start()
    llm.responder = echo
    tg = await FakeTelegram(random_token()).start()
    try:
        with tempfile.TemporaryDirectory(prefix="switchboard-bench-") as tmp:
            telegram = section(tg, allow_from=["*"], streaming=None if streaming else False)
            settings = settings_for(
                Path(tmp) / "home",
                llm.openai_url,
                telegram=telegram,
                web={"port": 0},
                # a member's allowance (60 turns an hour) would silence a long run
                limits={"user_turns_per_hour": 0, "user_daily_tokens": 0, **(CAPS if caps else {})},
                memory={"embeddings": embeddings},
                **({"llm": PRICED} if caps else {}),
            )
            traces = settings.data_dir / "traces"
            async with Gateway(settings, channels=[fast_channel(settings)]) as gateway:
                await tg.say("warm up", chat_id=CHAT, user_id=CHAT)
                await tg.wait_sent(1, chat_id=CHAT, timeout=30)
                await gateway.wait_idle()
                store = StoreCount()
                count_store(gateway, store)
                calls_before = len(tg.calls)
                asked_before = len(llm.requests)
                files_before = len(list(traces.glob("*/*.jsonl")))
                loop_cpu = time.thread_time()
                for i in range(turns):
                    await tg.say(f"question {i}", chat_id=CHAT, user_id=CHAT)
                    await tg.wait_sent(i + 2, chat_id=CHAT, timeout=30)
                    await gateway.wait_idle()
                loop_cpu = time.thread_time() - loop_cpu
                await gateway.indexer.idle()  # the last turns' vectors, counted too
                calls = Counter(c.method for c in tg.calls[calls_before:])
                calls.pop("getUpdates", None)
                files = len(list(traces.glob("*/*.jsonl"))) - files_before
                asked = len(llm.requests) - asked_before
    finally:
        await tg.stop()
        await llm.stop()
    report(turns, streaming, caps, calls, store, (files, asked), cpu=loop_cpu)


def report(  # noqa: PLR0917 - one line of the report each
    turns: int,
    streaming: bool,
    caps: bool,
    calls: Counter[str],
    store: StoreCount,
    counted: tuple[int, int],
    *,
    cpu: float,
) -> None:
    def per(value: float) -> str:
        return f"{value / turns:.2f}"

    files, asked = counted
    urgent, normal, reads, transactions, durable, statements = store.snapshot()
    mode = ("as shipped" if streaming else "streaming off") + (", money caps on" if caps else "")
    print(f"Per turn, {turns} turns in one direct chat, {mode} (the web chat on):")
    print(f"  Bot API calls        {per(sum(calls.values()))}  ", end="")
    print(", ".join(f"{m} {per(n)}" for m, n in sorted(calls.items())))
    print(f"  store round trips    {per(urgent + normal)}  (urgent {per(urgent)})")
    print(f"  reads on the loop    {per(reads)}  (SQLite: no round trip)")
    print(f"  transactions         {per(transactions)}")
    print(f"  commits to disk      {per(durable)}  (an fsync each)")
    print(f"  SQL statements       {per(statements)}")
    print(f"  trace files written  {per(files)}")
    print(f"  recall indexing      {per(store.jobs['background'])} store jobs, in the background")
    print(f"  event loop CPU       {1e3 * cpu / turns:.2f} ms (moves with the machine's load)")
    print(f"  model calls          {per(asked)}")
    print(f"  claims rules         {claims_time():.1f} µs per answer (a timing)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--streaming-off", action="store_true")
    parser.add_argument("--embeddings", default="builtin", choices=("builtin", "off"))
    parser.add_argument("--caps", action="store_true", help="money caps on, the model priced")
    args = parser.parse_args()
    asyncio.run(
        measure(
            args.turns,
            streaming=not args.streaming_off,
            embeddings=args.embeddings,
            caps=args.caps,
        )
    )


if __name__ == "__main__":
    main()
