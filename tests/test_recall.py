"""Memory that recalls: past conversations found by meaning, within the caller's scope, by the
real gateway with the built-in embedding model and the model calling ``memory_search``."""

from __future__ import annotations

import asyncio
from typing import Any

from channels.memory import MemoryChannel
from gateway.core.messages import ChatType
from gateway.runtime.app import Gateway
from tests.fakes.llm import FakeLLM, Recorded, Step, calls, text

SAID = "my bicycle is locked in the basement of Elm Street 12"
ASKED = "where did I leave bike"
PEOPLE = {"telegram": {"owners": ["1"], "allow_from": ["2", "3"], "group_allow_from": ["g"]}}


def searching(request: Recorded) -> Step:
    """A model that searches memory when asked where something is, and answers with what
    the search returned."""
    if ASKED in request.last_user_text:
        if not request.tool_results:
            return calls(("memory_search", {"query": ASKED}))
        return text(f"found: {request.tool_results[-1]}")
    return text("Okay.")


async def indexed(gateway: Gateway) -> None:
    async with asyncio.timeout(20):
        await gateway.indexer.idle()


async def say(channel: MemoryChannel, message: str, chat: str, sender: str, **push: Any) -> str:
    before = len(channel.texts(chat))
    await channel.push(message, chat_id=chat, sender_id=sender, **push)
    sent = await channel.wait_for(before + 1, chat_id=chat)
    return sent[-1].text


async def test_a_person_finds_what_they_said_three_conversations_ago_by_meaning(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = searching
    channel = MemoryChannel("telegram")
    async with run_gateway(channel=channel, **PEOPLE) as (gateway, _):
        await say(channel, SAID, "2", "2")  # never asked to remember it
        for chat in ("we should talk about the weather", "what a week", "thanks"):
            await say(channel, "/new", "2", "2")
            await say(channel, chat, "2", "2")
        await say(channel, "hello group", "g", "2", chat_type=ChatType.GROUP)
        await indexed(gateway)
        mine = await say(channel, ASKED, "2", "2")
        theirs = await say(channel, ASKED, "3", "3")
        group = await say(channel, f"@bot {ASKED}", "g", "2", chat_type=ChatType.GROUP)
    assert "Elm Street 12" in mine
    assert "you said on telegram" in mine
    assert "Elm Street" not in theirs
    assert "Elm Street" not in group
    searches = [r for r in fake_llm.requests if r.tool_results]
    assert len(searches) == 3  # each of them searched
