"""A chat's prompt only grows at its end, so the provider's prompt cache keeps serving it.

What a user would notice is the bill: a provider caches a prompt's prefix (tools, system,
then the conversation), and anything that changes early in it makes the rest full price.
So the time of each message travels with the message, the guidance for a request stays
with that request's message, and the memory block stays the same, byte for byte, while
memory does; the system prompt stays the same from one turn to the next (bench.cache
measures the share). A fact saved since is in the next turn's prompt, wherever it was saved.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from tests.fakes.clock import FakeClock
from tests.fakes.llm import FakeLLM, Recorded, Step, calls, text

STAMP = re.compile(r"^\[\d\d:\d\d\] ")


async def test_the_next_turn_repeats_the_prompt_so_far_and_adds_to_its_end(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    clock = FakeClock(datetime(2026, 11, 26, 9, 0, tzinfo=UTC))
    async with run_gateway(clock=clock) as (gateway, channel):
        memory = gateway.settings.workspace_dir / "MEMORY.md"
        memory.write_text("# Long-term memory\n\nThe user likes tea.\n")
        await channel.push("remind me tomorrow at 9 to call the bank")
        await channel.wait_for(1)
        await clock.advance(minutes=3)
        await channel.push("thanks")
        await channel.wait_for(2)
    first, second = fake_llm.requests
    assert "likes tea" in first.system_text
    assert second.system_text == first.system_text  # neither the minute nor memory moved
    assert second.body["messages"][: len(first.body["messages"])] == first.body["messages"]
    asked = first.raw_user_texts[-1]
    assert STAMP.match(asked)  # the time it was written, with the message
    assert "[guidance for this request]" in asked and "Scheduling" in asked
    assert "Guidance" not in first.system_text and "Today: 2026-11-26" in first.system_text
    assert "Scheduling" not in second.raw_user_texts[-1]  # "thanks" needs none


def remembering(fact: str) -> Any:
    """A model that saves ``fact`` when asked to remember it, and echoes anything else."""

    def respond(request: Recorded) -> Step:
        if request.last_user_text.startswith("Remember:"):
            if request.tool_results:
                return text("Noted.")
            return calls(("memory_append", {"content": fact, "to": "memory"}))
        return text(f"echo: {request.last_user_text}")

    return respond


async def test_a_fact_saved_in_another_chat_is_in_the_next_turns_prompt(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = remembering("The owner is allergic to peanuts.")
    async with run_gateway() as (_gateway, channel):
        await channel.push("good morning")  # this chat's prompt holds memory as it was
        await channel.wait_for(1)
        await channel.push("Remember: I am allergic to peanuts.", chat_id="terminal")
        await channel.wait_for(2)
        await channel.push("What am I allergic to?")
        await channel.wait_for(3)
    morning, *_, asked = fake_llm.requests
    assert "peanuts" not in morning.system_text
    assert "allergic to peanuts" in asked.system_text


async def test_after_new_the_prompt_holds_what_was_just_remembered(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = remembering("Sister Ilse's birthday: 14 March.")
    async with run_gateway() as (_gateway, channel):
        await channel.push("hi")
        await channel.wait_for(1)
        await channel.push("Remember: my sister Ilse's birthday is 14 March.")
        await channel.wait_for(2)
        await channel.push("/new")
        await channel.wait_for(3)
        await channel.push("When is my sister's birthday?")
        await channel.wait_for(4)
    asked = fake_llm.requests[-1]
    assert asked.user_texts == ["When is my sister's birthday?"]  # a fresh conversation
    assert "Ilse's birthday: 14 March" in asked.system_text


async def test_memory_written_elsewhere_shows_on_the_next_turn_and_the_next_day(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    clock = FakeClock(datetime(2026, 11, 26, 9, 0, tzinfo=UTC))
    async with run_gateway(clock=clock) as (gateway, channel):
        await channel.push("good morning")
        await channel.wait_for(1)
        memory = gateway.settings.workspace_dir / "MEMORY.md"
        memory.write_text("# Long-term memory\n\nThe user likes tea.\n")  # the owner's editor
        await channel.push("what do I like?")
        await channel.wait_for(2)
        await clock.advance(days=1)
        await channel.push("and now?")
        await channel.wait_for(3)
    before, same_day, next_day = fake_llm.requests
    assert "likes tea" not in before.system_text
    assert "likes tea" in same_day.system_text
    assert "likes tea" in next_day.system_text and "Today: 2026-11-27" in next_day.system_text
