"""Memory that recalls: past conversations found by meaning, within the caller's scope, by the
real gateway with the built-in embedding model and the model calling ``memory_search``."""

from __future__ import annotations

import asyncio
from typing import Any

from channels.memory import MemoryChannel
from gateway.cli.doctor.memory import memory_checks
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


def asking(query: str) -> Any:
    def respond(request: Recorded) -> Step:
        if request.body["messages"][-1]["role"] == "tool":  # the search's result
            return text(f"found: {request.tool_results[-1]}")
        if "look it up" in request.last_user_text:
            return calls(("memory_search", {"query": query}))
        return text("Herons are patient hunters, you know.")

    return respond


async def test_an_embeddings_endpoint_serves_recall_and_its_failure_falls_back_to_words(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = asking("heron river")
    memory = {
        "embeddings": "endpoint",
        "embeddings_url": fake_llm.openai_url,
        "embeddings_model": "fake-embed",
    }
    async with run_gateway(memory=memory) as (gateway, channel):
        await say(channel, "the heron nests by the river", "chat-1", "user-1")
        await indexed(gateway)
        by_meaning = await say(channel, "look it up", "chat-1", "user-1")
        fake_llm.embeddings_status = 500
        by_words = await say(channel, "look it up", "chat-1", "user-1")
        model = await gateway.store.db.run(
            lambda conn: conn.execute("SELECT DISTINCT model FROM recall_vectors").fetchall()
        )
    assert any("the heron nests by the river" in t for t in fake_llm.embedded)
    assert model == [("endpoint:fake-embed",)]
    assert "[heron] nests by the [river]" in by_meaning and "words only" not in by_meaning
    assert "[heron] nests by the [river]" in by_words
    assert "(searched by words only: the embeddings endpoint" in by_words


async def test_doctor_says_how_memory_search_finds_things(
    make_settings: Any, fake_llm: FakeLLM
) -> None:
    builtin = await memory_checks(make_settings())
    off = await memory_checks(make_settings(memory={"embeddings": "off"}))
    fake_llm.embeddings_status = 503
    down = await memory_checks(
        make_settings(
            memory={
                "embeddings": "endpoint",
                "embeddings_url": fake_llm.openai_url,
                "embeddings_model": "fake-embed",
            }
        )
    )
    assert [(c.status, "by meaning" in c.message) for c in builtin] == [("ok", True)]
    assert [(c.status, "words only" in c.message) for c in off] == [("ok", True)]
    assert [(c.status, "words only" in c.message) for c in down] == [("warn", True)]
    assert "memory.embeddings_url" in down[0].message


async def test_only_the_owner_searches_everywhere_and_only_when_asked(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    def respond(request: Recorded) -> Step:
        if request.body["messages"][-1]["role"] == "tool":
            return text(f"found: {request.tool_results[-1]}")
        if "look everywhere" in request.last_user_text:
            return calls(("memory_search", {"query": ASKED, "everywhere": True}))
        if "look it up" in request.last_user_text:
            return calls(("memory_search", {"query": ASKED}))
        return text("Noted, thank you for telling me.")

    fake_llm.responder = respond
    channel = MemoryChannel("telegram")
    async with run_gateway(channel=channel, **PEOPLE) as (gateway, _):
        await say(channel, SAID, "2", "2", sender_name="Ann")
        await indexed(gateway)
        owner_own = await say(channel, "look it up", "1", "1")
        owner_everywhere = await say(channel, "look everywhere", "1", "1")
        member_everywhere = await say(channel, "look everywhere", "3", "3")
        owner_in_group = await say(
            channel, "@bot look everywhere", "g", "1", chat_type=ChatType.GROUP
        )
    assert "Elm Street" not in owner_own  # another person's direct chat: not without asking
    assert (
        "Elm Street 12" in owner_everywhere
        and "Ann (telegram user 2) said in their direct chat" in owner_everywhere  # by name
    )
    assert "only the owner, in their own direct chat" in member_everywhere
    assert "only the owner, in their own direct chat" in owner_in_group
    assert "Elm Street" not in member_everywhere + owner_in_group


async def test_an_earlier_answer_that_quoted_a_search_comes_after_what_was_said(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    """dog4's finding 5: the answer to an earlier search, which quoted its hits, is found
    again by the same words; it comes after the message it quoted, and its quoted lines are
    indented under it, not taken for hits of their own."""
    fake_llm.responder = asking("dentist appointment")
    channel = MemoryChannel("telegram")
    async with run_gateway(channel=channel, **PEOPLE) as (gateway, _):
        await say(channel, "My dentist appointment is on Thursday with Dr. Okafor", "1", "1")
        await say(channel, "I must move the dentist appointment if work runs late", "1", "1")
        await indexed(gateway)
        first = await say(channel, "look it up", "1", "1")
        await indexed(gateway)
        again = await say(channel, "look it up", "1", "1")
    hits = again.removeprefix("found: ").splitlines()
    quoted = next(
        n for n, line in enumerate(hits) if line.startswith("I said") and "said" in line[6:]
    )
    original = next(n for n, line in enumerate(hits) if "Thursday with Dr. Okafor" in line)
    assert len(first.splitlines()) > 1  # the first answer quoted two hits
    assert original < quoted
    assert hits[quoted + 1].startswith("    you")  # its second quoted line
