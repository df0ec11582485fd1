"""Nothing lost at compaction: the lasting facts a summary finds are saved to the chat's own
memory before it replaces their messages (on every path: in the background, after the
provider's "context too long", on /compact), the person's own messages stay word for word
beside the summary, and what was summarized is still found by memory_search."""

from __future__ import annotations

import asyncio
from datetime import date
from typing import Any

from agent.compaction import FACTS, quotes, split_facts
from channels.memory import MemoryChannel
from gateway.core.messages import ChatType
from gateway.runtime.app import Gateway
from tests.fakes.llm import FakeLLM, Recorded, Step, calls, error, text
from tests.test_memory_context import LONG, SMALL_WINDOW, chat, is_summary_request
from tests.test_recall import say

FACT = "My locker code at the swimming pool is 4711"
SUMMARY = f"You talked about foxes at length.\n{FACTS}\n- The user's pool locker code is 4711"


def summarizing_with_facts(request: Recorded) -> Step:
    if is_summary_request(request):
        return text(SUMMARY)
    if "where did I put my swimming things" in request.last_user_text:
        if not request.tool_results:
            return calls(("memory_search", {"query": "swimming pool locker"}))
        return text(f"found: {request.tool_results[-1]}")
    return text(f"ok: {request.last_user_text[:20]}")


def today_note(gateway: Gateway, scope_dir: str = "") -> str:
    base = gateway.settings.workspace_dir / (scope_dir or "memory")
    path = base / f"{date.today().isoformat()}.md"
    return path.read_text() if path.exists() else ""


async def test_a_fact_said_once_before_a_summary_is_kept_and_still_found(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = summarizing_with_facts
    async with run_gateway(llm=SMALL_WINDOW) as (gateway, channel):
        await chat(channel, [f"{FACT}. {LONG}"] + [f"turn {i}. {LONG}" for i in range(8)])
        await gateway.agent.window.compactor.wait("memory:chat-1")
        state, _ = await gateway.store.history.load("memory:chat-1", limit=None)
        async with asyncio.timeout(20):
            await gateway.indexer.idle()
        await chat(channel, ["where did I put my swimming things?"])
        note = today_note(gateway)
        origins = await gateway.store.memory_entries.origins(
            "main", [(f"memory/{date.today().isoformat()}.md", _line_of(note, "4711"))]
        )
    assert state.summary == "You talked about foxes at length."  # the facts are not in it
    assert "The user's pool locker code is 4711" in note  # saved before the summary
    [origin] = origins.values()
    assert (origin.person, origin.channel, origin.outside) == ("memory:user-1", "memory", False)
    found = channel.texts()[-1]
    assert "[swimming] [pool] is 4711" in found  # the summarized message itself
    assert "pool locker code is 4711" in found  # and the saved fact, with where it came from
    assert "(from memory:user-1 in memory:chat-1" in found


def _line_of(note: str, needle: str) -> str:
    return next(line.strip() for line in note.splitlines() if needle in line)


async def test_the_persons_own_words_stay_beside_the_summary(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    def long_answers(request: Recorded) -> Step:
        if is_summary_request(request):
            return text(SUMMARY)
        return text(f"About {request.last_user_text[:12]}: {LONG}")  # the agent's rounds

    fake_llm.responder = long_answers
    words = [f"note {i}: bring the {thing}" for i, thing in enumerate(["tent", "stove", "map"])]
    async with run_gateway(llm=SMALL_WINDOW) as (gateway, channel):
        await chat(channel, [*words, *(f"and then {i}" for i in range(8))])
        await gateway.agent.window.compactor.wait("memory:chat-1")
        state, kept = await gateway.store.history.load("memory:chat-1", limit=None)
        await chat(channel, ["what should I bring?"])
    assert state.summary and state.summary_quotes
    last = [r for r in fake_llm.requests if not is_summary_request(r)][-1]
    assert all(w not in m.body["content"] for m in kept for w in words)  # summarized...
    for said in words:  # ...yet in the prompt word for word
        assert said in last.system_text
    assert "What they wrote then, word for word" in last.system_text
    assert "About note 0" not in last.system_text  # the agent's words: only in the summary


async def test_without_quotes_only_the_summary_replaces_them(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = summarizing_with_facts
    async with run_gateway(llm=SMALL_WINDOW, memory={"quote_share": 0}) as (gateway, channel):
        await chat(channel, ["note: bring the tent", *(f"turn {i}. {LONG}" for i in range(8))])
        await gateway.agent.window.compactor.wait("memory:chat-1")
        state, _ = await gateway.store.history.load("memory:chat-1", limit=None)
    assert state.summary and state.summary_quotes is None


async def test_facts_are_saved_on_the_overflow_path_and_on_compact(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = summarizing_with_facts
    async with run_gateway(llm={"context_window": 100_000}) as (gateway, channel):
        await chat(channel, [f"turn {i}. {LONG}" for i in range(6)])
        fake_llm.queue(
            error(400, "maximum context length is 4096 tokens", code="context_length_exceeded")
        )
        await chat(channel, ["one more"])
        overflow = today_note(gateway)
        (gateway.settings.workspace_dir / "memory" / f"{date.today().isoformat()}.md").unlink()
        await chat(channel, [f"turn {i}. {LONG}" for i in range(6)])
        await chat(channel, ["/compact"])
        compacted = today_note(gateway)
    assert "pool locker code is 4711" in overflow
    assert "pool locker code is 4711" in compacted
    assert channel.texts()[-1].startswith("Compacted:")


async def test_facts_of_a_direct_chat_never_reach_a_group(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = summarizing_with_facts
    channel = MemoryChannel("telegram")
    people = {"telegram": {"owners": ["1"], "allow_from": ["2"], "group_allow_from": ["g"]}}
    async with run_gateway(channel=channel, llm=SMALL_WINDOW, **people) as (gateway, _):
        await chat(channel, [f"turn {i}. {LONG}" for i in range(9)], chat_id="2", sender_id="2")
        await gateway.agent.window.compactor.wait("telegram:2")
        await say(channel, "@bot hello", "g", "2", chat_type=ChatType.GROUP)
        person = today_note(gateway, "memory/people/telegram-2")
        group_prompt = fake_llm.requests[-1].system_text
    assert "pool locker code is 4711" in person
    assert "4711" not in group_prompt


def test_facts_are_read_from_under_their_line_and_quotes_fit_their_budget() -> None:
    assert split_facts(f"sum\n{FACTS}\n- one\n-  \nnot a fact\n- two") == ("sum", ["one", "two"])
    assert split_facts("just a summary") == ("just a summary", [])
    said = [(1_700_000_000.0 + i, f"[10:0{i}] message {i}") for i in range(5)]
    kept = quotes(said, budget=30)
    assert kept is not None and "message 4" in kept and "message 0" not in kept
    assert kept.index("message 3") < kept.index("message 4")  # oldest first
    assert quotes(said, budget=0) is None
    assert quotes([(0.0, "x" * 10_000)], budget=10_000) is not None  # a paste is cut
