"""Benchmark: the core pipeline (journal, dispatcher, agent loop, outbox) on a fake LLM.

Run from the repository root: ``python -m bench.core [--turns 60] [--chats 50]``.
The fake LLM runs in a separate process with a fixed latency (200 ms), so CPU time and
memory are the gateway's own. The channel is the in-memory one.

* overhead per turn: push -> answer delivered, minus the LLM latency (sequential turns)
* CPU per turn: the gateway process's CPU time over those turns
* N chats at once: N messages in N chats at the same instant; wall time until all answered
* RSS idle (after start, before traffic) and peak
* first-prompt tokens: the first request (messages + tool schemas), counted with tiktoken
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from agent.tokens import TokenCounter
from bench.common import (
    LLM_LATENCY,
    llm_process,
    peak_rss_mib,
    percentile,
    quiet_proxies,
    rss_mib,
    settings_for,
)
from channels.memory import MemoryChannel
from gateway.runtime.app import Gateway


async def sequential(channel: MemoryChannel, turns: int, *, chats: int = 10) -> list[float]:
    overheads = []
    for i in range(turns):
        chat = f"seq-{i % chats}"
        before = len(channel.texts(chat))
        started = time.perf_counter()
        await channel.push(f"hello number {i}", chat_id=chat, sender_id=chat)
        await channel.wait_for(before + 1, chat_id=chat, max_wait=30)
        overheads.append((time.perf_counter() - started - LLM_LATENCY) * 1000)
    return overheads


async def burst(channel: MemoryChannel, chats: int) -> float:
    started = time.perf_counter()
    await asyncio.gather(
        *(
            channel.push("all at once", chat_id=f"burst-{i}", sender_id=f"b{i}")
            for i in range(chats)
        )
    )
    await asyncio.gather(
        *(channel.wait_for(1, chat_id=f"burst-{i}", max_wait=60) for i in range(chats))
    )
    return time.perf_counter() - started


async def first_prompt_tokens(base_url: str) -> int:
    """Tokens of the first request a fresh chat sends (system, tools, the user's message)."""
    from tests.fakes.llm import FakeLLM

    fake = await FakeLLM().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            settings = settings_for(Path(tmp) / "home", fake.openai_url)
            channel = MemoryChannel()
            async with Gateway(settings, channels=[channel]):
                await channel.push("What's on my calendar tomorrow?")
                await channel.wait_for(1)
        body = fake.requests[0].body
        counter = TokenCounter()
        counter.load()
        return counter.count(json.dumps(body["messages"], ensure_ascii=False)) + counter.count(
            json.dumps(body.get("tools", []), ensure_ascii=False)
        )
    finally:
        await fake.stop()


async def run(turns: int, chats: int) -> None:
    async with llm_process() as base_url:
        with tempfile.TemporaryDirectory(prefix="switchboard-bench-") as tmp:
            settings = settings_for(Path(tmp) / "home", base_url)
            channel = MemoryChannel()
            async with Gateway(settings, channels=[channel]) as gateway:
                await asyncio.sleep(0.5)
                idle = rss_mib()
                await sequential(channel, 5)  # warm-up: connections, caches
                cpu = time.process_time()
                overheads = await sequential(channel, turns)
                cpu_ms = (time.process_time() - cpu) * 1000 / turns
                burst_s = await burst(channel, chats)
                await gateway.wait_idle()
                peak = peak_rss_mib()
    tokens = await first_prompt_tokens(base_url)
    print(
        f"Core pipeline benchmark (in-memory channel, fake LLM at {LLM_LATENCY * 1000:.0f} ms in its own process)"
    )
    print(
        f"  overhead per turn ({turns} sequential turns): p50 {statistics.median(overheads):.1f} ms, p99 {percentile(overheads, 0.99):.1f} ms"
    )
    print(f"  CPU per turn (gateway process): {cpu_ms:.1f} ms")
    print(f"  {chats} chats at once: {burst_s:.2f} s")
    print(f"  RSS idle {idle:.0f} MiB, peak {peak:.0f} MiB")
    print(f"  first-prompt tokens (default tools): {tokens}")


def main() -> None:
    parser = argparse.ArgumentParser(description="core pipeline benchmark")
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--chats", type=int, default=50)
    args = parser.parse_args()
    quiet_proxies()
    asyncio.run(run(args.turns, args.chats))


if __name__ == "__main__":
    main()
