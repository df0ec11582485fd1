"""Benchmark: how much of a chat's prompt the provider reads from its cache (Anthropic).

Run from the repository root: ``python -m bench.cache [--turns 50] [--minutes 2]
[--reflection]``.

The real gateway (Anthropic provider, prompt caching on) talks to the fake Messages API,
which simulates Anthropic's prompt cache: a prefix ending at a cache breakpoint is written;
a later request reads the longest written prefix that ends within the 20 blocks before one
of its breakpoints (tests/fakes/llm_anthropic.py). One person chats for ``--turns`` turns,
``--minutes`` apart on the gateway's clock (so the time the model is told moves as in a real
chat): most turns are answered directly, every fifth reads a file first, every seventh
writes a line to today's note, and the window is small enough that the conversation is
summarized along the way. Every request counts, tool steps and summaries included;
``--reflection`` also turns on reflection after non-trivial turns (on by default in a real
gateway): its requests are small prompts of their own, mostly below the provider's minimum
cacheable size, so they lower the share while costing less than a fork of the chat would.

Prints the input tokens of all requests, the share read from cache (target: 95 %), and what
they cost in uncached-token equivalents at Anthropic's prices (a read 0.1, a write 1.25).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agent.compaction import SUMMARY_PROMPT
from bench.common import anthropic_settings_for, quiet_proxies
from channels.memory import MemoryChannel
from gateway.core.clock import SystemClock
from gateway.runtime.app import Gateway
from tests.fakes.llm import FakeLLM, Recorded, Step, calls, text

SUMMARY_MARK = SUMMARY_PROMPT.split("{previous}")[0][:40]
FILLER = (
    "I spent the morning on the quarterly report and the afternoon answering email; "
    "the dog got his walk before the rain. "
)


class ChatClock:
    """The gateway's clock, moved on by the benchmark between turns."""

    def __init__(self) -> None:
        self.at = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)
        self._sleeper = SystemClock()

    def now(self) -> datetime:
        return self.at

    async def sleep_until(self, when: datetime, wake: asyncio.Event | None = None) -> None:
        await self._sleeper.sleep_until(datetime.now(UTC) + (when - self.at), wake)


def respond(request: Recorded) -> Step:
    prompt = request.last_user_text
    if SUMMARY_MARK in prompt:
        return text("The user has been telling the assistant about their days at work.")
    turn = int(match.group(1)) if (match := re.search(r"Turn (\d+)\.", prompt)) else 0
    last = request.body["messages"][-1]["content"]
    if isinstance(last, list) and last[-1].get("type") == "tool_result":
        return text("Done. Anything else?")
    if turn % 5 == 0:
        return calls(("read_file", {"path": "notes.md"}))
    if turn % 7 == 0:
        return calls(("memory_append", {"content": f"Turn {turn}: a day like the others."}))
    return text(f"Thanks for telling me about turn {turn}. Sounds like a full day.")


async def run(turns: int, minutes: float, window: int, reflection: bool) -> None:
    fake = await FakeLLM(responder=respond).start()
    clock = ChatClock()
    try:
        with tempfile.TemporaryDirectory(prefix="switchboard-cache-") as tmp:
            settings = anthropic_settings_for(
                Path(tmp) / "home",
                fake.anthropic_url,
                window=window,
                reflection=reflection,
                heartbeat={"enabled": False},
                web={"enabled": False},
            )
            (settings.workspace_dir / "notes.md").write_text("Buy milk.\nCall the bank.\n")
            channel = MemoryChannel()
            async with Gateway(settings, channels=[channel], clock=clock) as gateway:
                compactor = gateway.agent.window.compactor
                assert compactor is not None
                for turn in range(1, turns + 1):
                    await channel.push(
                        f"Turn {turn}. {FILLER * (1 + turn % 3)}", message_id=f"t{turn}"
                    )
                    await channel.wait_for(turn, max_wait=30)
                    await compactor.wait("memory:chat-1")
                    clock.at += timedelta(minutes=minutes)
        summaries = sum(1 for r in fake.requests if SUMMARY_MARK in r.last_user_text)
    finally:
        await fake.stop()
    usage = fake.usage_totals
    total = usage["input"] + usage["read"] + usage["written"]
    print(
        f"Prompt cache, {turns} turns {minutes:g} min apart, {len(fake.requests)} requests"
        f" ({summaries} summaries{', reflection on' if reflection else ''}), Anthropic provider,"
        f" {window}-token window"
    )
    cost = usage["input"] + 0.1 * usage["read"] + 1.25 * usage["written"]
    print(
        f"  input tokens {total}: read from cache {usage['read'] / total:.1%},"
        f" written {usage['written'] / total:.1%}, uncached {usage['input'] / total:.1%}"
        "  (target: read >= 95%)"
    )
    print(f"  cost: {cost:.0f} uncached-token equivalents ({cost / total:.1%} of paying for all)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--window", type=int, default=8_000)
    parser.add_argument("--reflection", action="store_true", help="reflect after turns too")
    args = parser.parse_args()
    quiet_proxies()
    asyncio.run(run(args.turns, args.minutes, args.window, args.reflection))


if __name__ == "__main__":
    main()
