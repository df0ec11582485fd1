"""Benchmark: the gateway through the real Telegram channel, against the fake Bot API.

Run from the repository root: ``python -m bench.telegram [--turns 40] [--chats 50]``.

* overhead per turn: from the moment an update is available to ``getUpdates`` until its
  ``sendMessage`` reaches the fake, minus the fake LLM's fixed latency (0.2 s). Turns run one
  after another, each in its own chat (``bench.compare`` measures one chat's conversation).
* N chats at once: N users write in the same instant; wall time until all N answers arrived.
  Measured twice: with Telegram's default pacing (30 messages/s overall after a burst of
  100) and with pacing lifted.

The fake LLM runs in its own process; the fake Bot API shares the gateway's event loop, so
CPU time per turn includes its share.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import llm_process
from channels.buckets import Rate
from channels.telegram.adapter import TelegramChannel
from channels.telegram.sender import Pacing
from gateway.config.settings import Settings
from gateway.runtime.app import Gateway
from gateway.runtime.home import onboard
from tests.fakes.telegram import FakeTelegram, random_token

LLM_LATENCY = 0.2
UNPACED = Pacing(
    per_chat=Rate(1000, burst=1000), per_group=Rate(1000, burst=1000), overall=Rate(1e4, burst=1e4)
)


def settings_for(home: Path, llm_url: str, tg: FakeTelegram) -> Settings:
    settings = Settings(
        home=home,
        agent={"reflection": False},
        llm={
            "provider": "openai",
            "model": "fake-model",
            "base_url": llm_url,
            "api_key": "sk-bench-key-123456",
            "max_retries": 0,
        },
        telegram={
            "token": tg.token,
            "base_url": tg.base_url,
            "allow_from": ["*"],
            "poll_timeout_seconds": 30,
        },
    )
    onboard(settings.home, settings.workspace_dir)
    return settings


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


async def sequential(tg: FakeTelegram, turns: int) -> tuple[list[float], float]:
    overheads = []
    cpu_started = time.process_time()
    for i in range(turns):
        chat = 10_000 + i
        update = await tg.say(f"ping {i}", chat_id=chat, user_id=chat)
        [reply] = await tg.wait_sent(1, chat_id=chat, timeout=30)
        elapsed = reply.at - tg.pushed_at[update["update_id"]]
        overheads.append(elapsed - LLM_LATENCY)
    cpu_ms = (time.process_time() - cpu_started) * 1000 / turns
    return overheads, cpu_ms


async def burst(tg: FakeTelegram, chats: int, first_chat: int) -> float:
    ids = [first_chat + i for i in range(chats)]
    started = time.perf_counter()
    await asyncio.gather(*(tg.say("all at once", chat_id=c, user_id=c) for c in ids))
    await asyncio.gather(*(tg.wait_sent(1, chat_id=c, timeout=60) for c in ids))
    return max(tg.sent(c)[0].at for c in ids) - started


async def run(turns: int, chats: int) -> None:
    async with llm_process(LLM_LATENCY) as llm_url:
        await measure(llm_url, turns, chats)


async def measure(llm_url: str, turns: int, chats: int) -> None:
    results: dict[str, float] = {}
    for label, pacing in (("paced", None), ("unpaced", UNPACED)):
        with tempfile.TemporaryDirectory(prefix="switchboard-bench-") as tmp:
            tg = await FakeTelegram(random_token()).start()
            try:
                settings = settings_for(Path(tmp) / "home", llm_url, tg)
                channel = TelegramChannel(
                    settings.telegram, settings.channel_context(), pacing=pacing
                )
                async with Gateway(settings, channels=[channel]) as gateway:
                    if label == "paced":
                        await sequential(tg, 3)  # warm-up
                        overheads, cpu_ms = await sequential(tg, turns)
                    results[label] = await burst(tg, chats, first_chat=50_000)
                    await gateway.wait_idle()
            finally:
                await tg.stop()
    ms = [o * 1000 for o in overheads]
    print(f"Telegram channel benchmark (fake Bot API, fake LLM at {LLM_LATENCY * 1000:.0f} ms)")
    print(
        f"  overhead per turn ({turns} sequential turns): "
        f"p50 {statistics.median(ms):.1f} ms, p99 {percentile(ms, 0.99):.1f} ms, "
        f"max {max(ms):.1f} ms"
    )
    print(
        f"  CPU per turn (gateway + fake Bot API; the fake LLM runs in its own process): {cpu_ms:.1f} ms"
    )
    print(f"  {chats} chats at once, Telegram pacing (default):  {results['paced']:.2f} s")
    print(f"  {chats} chats at once, pacing lifted:              {results['unpaced']:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--chats", type=int, default=50)
    args = parser.parse_args()
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        os.environ.pop(name, None)
    os.environ["NO_PROXY"] = "127.0.0.1,localhost"
    asyncio.run(run(args.turns, args.chats))


if __name__ == "__main__":
    main()
