"""Benchmark: where a burst's CPU goes, thread by thread.

Run from the repository root: ``python -m bench.threads [--bursts 10] [--chats 50]
[--streaming-off] [--postgres]``.

One gateway in this process with the real Telegram channel (python-telegram-bot against the
fake Bot API, also in this process) and the fake LLM in its own process, answering after
200 ms. After a warm-up turn, ``--bursts`` times ``--chats`` new chats write at the same
instant; each burst waits until every chat was answered and the gateway is idle. Printed
per turn:

* CPU time of each thread (``/proc/self/task``): the event loop's (which also runs the
  fake Bot API, so read it as an upper bound), the store's writer, the worker threads;
* what was handed to the worker threads (``asyncio.to_thread``, executors), by function,
  and the CPU each took there.

``--postgres`` runs the store on a fresh database of the local PostgreSQL server (made and
dropped as bench.cluster does) instead of SQLite. CPU time moves with the
machine's load; compare figures from the same run, or alternate runs of two versions.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import functools
import os
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import llm_process, quiet_proxies, settings_for
from gateway.runtime.app import Gateway
from tests.fakes.telegram import FakeTelegram, fast_channel, random_token, section

TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def thread_cpu() -> Counter[str]:
    """CPU milliseconds so far of each kind of thread in this process."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    found: Counter[str] = Counter()
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        name = names.get(int(tid), "other")
        if name.startswith(("asyncio_", "ThreadPoolExecutor")):
            name = "worker threads"
        found[name] += (int(fields[11]) + int(fields[12])) * TICK_MS
    return found


class CountingExecutor(concurrent.futures.ThreadPoolExecutor):
    """The event loop's default executor, counting what it is handed and its CPU."""

    def __init__(self) -> None:
        super().__init__(max_workers=8)
        self.calls: Counter[str] = Counter()
        self.cpu_ms: Counter[str] = Counter()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        label = _name(fn)
        self.calls[label] += 1

        def timed(*a: Any, **k: Any) -> Any:
            started = time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                self.cpu_ms[label] += (time.thread_time() - started) * 1000

        return super().submit(timed, *args, **kwargs)


def _name(fn: Any) -> str:
    """The function a ``to_thread`` call runs (unwrapping its partials and context)."""
    while isinstance(fn, functools.partial):
        context_run = repr(fn.func).startswith("<built-in method run of")
        fn = fn.args[0] if context_run and fn.args else fn.func
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


async def measure(args: argparse.Namespace) -> None:
    quiet_proxies()
    async with contextlib.AsyncExitStack() as stack:
        url = None
        if args.postgres:  # psycopg only then
            from bench.cluster import SERVER, database

            url = await stack.enter_async_context(database(SERVER))
        await measure_on(args, url)


async def measure_on(args: argparse.Namespace, url: str | None) -> None:
    async with llm_process() as llm_url:
        tg = await FakeTelegram(random_token()).start()
        try:
            with tempfile.TemporaryDirectory(prefix="switchboard-bench-") as tmp:
                storage = {"storage": {"url": url}} if url is not None else {}
                settings = settings_for(
                    Path(tmp) / "home",
                    llm_url,
                    telegram=section(
                        tg,
                        allow_from=["*"],
                        streaming=False if args.streaming_off else None,
                        messages_per_second=1000,
                    ),
                    web={"enabled": False} if args.streaming_off else {"port": 0},
                    heartbeat={"enabled": False},
                    **storage,
                )
                async with Gateway(settings, channels=[fast_channel(settings)]) as gateway:
                    await tg.say("warm up", chat_id=1, user_id=1)
                    await tg.wait_sent(1, chat_id=1, timeout=30)
                    await gateway.wait_idle()
                    executor = CountingExecutor()
                    asyncio.get_running_loop().set_default_executor(executor)
                    before = thread_cpu()
                    for burst in range(args.bursts):
                        chats = range(10_000 + burst * 1_000, 10_000 + burst * 1_000 + args.chats)
                        await asyncio.gather(*(tg.say("hi", chat_id=c, user_id=c) for c in chats))
                        for chat in chats:
                            await tg.wait_sent(1, chat_id=chat, timeout=60)
                        await gateway.wait_idle()
                    after = thread_cpu()
                    handed = (Counter(executor.calls), Counter(executor.cpu_ms))  # not stop's
        finally:
            await tg.stop()
    report(args, before, after, handed)


def report(
    args: argparse.Namespace,
    before: Counter[str],
    after: Counter[str],
    handed: tuple[Counter[str], Counter[str]],
) -> None:
    turns = args.bursts * args.chats
    store = "PostgreSQL" if args.postgres else "SQLite"
    mode = "streaming off" if args.streaming_off else "as shipped"
    print(f"{args.bursts} bursts of {args.chats} new chats, {mode}, {store}; CPU per turn:")
    total = 0.0
    for name in sorted(after):
        spent = (after[name] - before.get(name, 0)) / turns
        total += spent
        if spent:
            print(f"  {name:<40} {spent:6.2f} ms")
    print(f"  {'all (the fake Bot API included)':<40} {total:6.2f} ms")
    print("handed to worker threads, per turn:")
    calls, cpu_ms = handed
    for label, count in calls.most_common():
        print(f"  {count / turns:5.2f}  {cpu_ms[label] / turns:6.3f} ms  {label}")
    if not calls:
        print("  nothing")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--bursts", type=int, default=10)
    parser.add_argument("--chats", type=int, default=50)
    parser.add_argument("--streaming-off", action="store_true")
    parser.add_argument("--postgres", action="store_true")
    asyncio.run(measure(parser.parse_args()))


if __name__ == "__main__":
    main()
