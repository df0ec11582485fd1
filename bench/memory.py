"""Benchmark: a 300-turn conversation in a 16k-token window (issue "memory and context").

Run from the repository root: ``python -m bench.memory [--turns 300] [--window 16000]``.
Drives the real gateway (Anthropic provider, prompt caching) against the fake Messages API,
which simulates Anthropic's prompt cache (a prefix ending at a cache breakpoint is written;
a later request starting with it reads it). The fake summarizer keeps the previous summary
plus every "Remember:" line it is shown, like a faithful summarizer would.

Prints: the largest prompt sent (must stay under the window), total input tokens, the share
read from cache, how often the session was summarized, and whether a fact stated in turn 3
is still in the prompt at the last turn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
from pathlib import Path

from agent.compaction import SUMMARY_PROMPT
from agent.tokens import TokenCounter
from bench.common import anthropic_settings_for, quiet_proxies
from channels.memory import MemoryChannel
from gateway.runtime.app import Gateway
from tests.fakes.llm import FakeLLM, Recorded, Step, text

FACT = "Remember: my locker code is 4711."
FILLER = (
    "Today I worked on the quarterly report, answered a pile of emails, and walked the dog "
    "along the river before the rain started. "
)
SUMMARY_MARK = SUMMARY_PROMPT.split("{previous}")[0][:40]


def respond(request: Recorded) -> Step:
    prompt = request.last_user_text
    if SUMMARY_MARK in prompt:
        previous = re.search(r'earlier summary comes first: "(.*?)"\)', prompt, re.DOTALL)
        facts = sorted(set(re.findall(r"Remember: [^.\n]*\.", prompt)))
        kept = (
            previous.group(1)
            if previous
            else "You have been chatting with the user about their days."
        )
        extra = [f for f in facts if f not in kept]
        return text(" ".join([kept, *extra]))
    return text(f"Thanks for telling me. ({len(prompt)} characters noted.)")


async def run(turns: int, window: int) -> None:
    fake = await FakeLLM(responder=respond).start()
    counter = TokenCounter()
    counter.load()
    try:
        with tempfile.TemporaryDirectory(prefix="switchboard-memory-") as tmp:
            settings = anthropic_settings_for(Path(tmp) / "home", fake.anthropic_url, window=window)
            channel = MemoryChannel()
            async with Gateway(settings, channels=[channel]) as gateway:
                compactor = gateway.agent.window.compactor
                assert compactor is not None
                for turn in range(1, turns + 1):
                    if turn == 3:
                        message = f"{FACT} {FILLER}"
                    elif turn == turns:
                        message = "What is my locker code?"
                    else:
                        message = f"Turn {turn}. {FILLER * (1 + turn % 3)}"
                    await channel.push(message, message_id=f"t{turn}")
                    await channel.wait_for(turn, max_wait=30)
                    await compactor.wait("memory:chat-1")
                summaries = sum(1 for r in fake.requests if SUMMARY_MARK in r.last_user_text)
    finally:
        await fake.stop()
    chat = [r for r in fake.requests if SUMMARY_MARK not in r.last_user_text]
    sizes = [counter.count(json.dumps(r.body, ensure_ascii=False)) for r in chat]
    last = chat[-1]
    remembered = "4711" in last.system_text or any("4711" in t for t in last.user_texts)
    print(
        f"Memory benchmark: {turns} turns, {window}-token window, Anthropic provider with prompt caching"
    )
    print(f"  largest prompt sent: {max(sizes)} tokens ({max(sizes) / window:.0%} of the window)")
    usage = fake.usage_totals
    total = usage["input"] + usage["read"] + usage["written"]
    print(
        f"  total input tokens: {total} (read from cache {usage['read'] / total:.0%}, written {usage['written'] / total:.0%}, uncached {usage['input'] / total:.0%})"
    )
    print(f"  summarizations: {summaries}")
    print(f"  fact from turn 3 in the prompt at turn {turns}: {'yes' if remembered else 'NO'}")


def main() -> None:
    parser = argparse.ArgumentParser(description="300-turn memory benchmark")
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--window", type=int, default=16_000)
    args = parser.parse_args()
    quiet_proxies()
    asyncio.run(run(args.turns, args.window))


if __name__ == "__main__":
    main()
