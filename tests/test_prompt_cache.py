"""A chat's prompt only grows at its end, so the provider's prompt cache keeps serving it.

What a user would notice is the bill: a provider caches a prompt's prefix (tools, system,
then the conversation), and anything that changes early in it makes the rest full price.
So the time of each message travels with the message, the guidance for a request stays
with that request's message, and memory is read once per stretch of conversation; the
system prompt stays the same from one turn to the next (bench.cache measures the share).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from tests.fakes.clock import FakeClock
from tests.fakes.llm import FakeLLM

STAMP = re.compile(r"^\[\d\d:\d\d\] ")


async def test_the_next_turn_repeats_the_prompt_so_far_and_adds_to_its_end(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    clock = FakeClock(datetime(2026, 11, 26, 9, 0, tzinfo=UTC))
    async with run_gateway(clock=clock) as (gateway, channel):
        await channel.push("remind me tomorrow at 9 to call the bank")
        await channel.wait_for(1)
        await clock.advance(minutes=3)
        memory = gateway.settings.workspace_dir / "MEMORY.md"
        memory.write_text("# Long-term memory\n\nThe user likes tea.\n")  # written elsewhere
        await channel.push("thanks")
        await channel.wait_for(2)
    first, second = fake_llm.requests
    assert second.system_text == first.system_text  # neither the minute nor memory moved
    assert second.body["messages"][: len(first.body["messages"])] == first.body["messages"]
    asked = first.raw_user_texts[-1]
    assert STAMP.match(asked)  # the time it was written, with the message
    assert "[guidance for this request]" in asked and "Scheduling" in asked
    assert "Guidance" not in first.system_text and "Today: 2026-11-26" in first.system_text
    assert "Scheduling" not in second.raw_user_texts[-1]  # "thanks" needs none


async def test_memory_written_elsewhere_shows_from_the_next_day_on(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    clock = FakeClock(datetime(2026, 11, 26, 9, 0, tzinfo=UTC))
    async with run_gateway(clock=clock) as (gateway, channel):
        await channel.push("good morning")
        await channel.wait_for(1)
        memory = gateway.settings.workspace_dir / "MEMORY.md"
        memory.write_text("# Long-term memory\n\nThe user likes tea.\n")
        await channel.push("what do I like?")
        await channel.wait_for(2)
        await clock.advance(days=1)
        await channel.push("and now?")
        await channel.wait_for(3)
    _, same_day, next_day = fake_llm.requests
    assert "likes tea" not in same_day.system_text
    assert "likes tea" in next_day.system_text and "Today: 2026-11-27" in next_day.system_text
