"""Memory and context: summarization, overflow recovery, skills, scoping, reflection."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agent.compaction import SUMMARY_PROMPT
from agent.llm.types import ChatMessage
from agent.reflection import current_exchange
from agent.tokens import TokenCounter
from channels.memory import MemoryChannel
from gateway.core.messages import ChatType
from tests.fakes.llm import FakeLLM, Recorded, Step, as_written, calls, error, text

SMALL_WINDOW = {"context_window": 4_000}
LONG = "The quick brown fox jumps over the lazy dog near the riverbank. " * 20  # ~300 tokens
SUMMARY_MARK = SUMMARY_PROMPT.split("{previous}")[0][:40]


def is_summary_request(request: Recorded) -> bool:
    return SUMMARY_MARK in request.last_user_text


def summarizing(
    summary: str = "You and the user talked about foxes; the user's code word is AMBER.",
) -> Any:
    def respond(request: Recorded) -> Step:
        if is_summary_request(request):
            return text(summary)
        return text(f"ok: {request.last_user_text[:20]}")

    return respond


async def chat(channel: MemoryChannel, messages: list[str], **push: Any) -> None:
    sent = len(channel.sent)
    for i, message in enumerate(messages, start=1):
        await channel.push(message, **push)
        await channel.wait_for(sent + i, chat_id=push.get("chat_id"))


async def test_a_templates_examples_are_not_read_as_facts(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    """USER.md keeps the template's commented example ("Name: Alex") under what the owner
    wrote: the model reads only what they wrote (it answered "My name is Alex")."""
    async with run_gateway() as (gateway, channel):
        user_md = gateway.settings.workspace_dir / "USER.md"
        assert "Name: Alex" in user_md.read_text()  # the template's example, commented
        user_md.write_text(user_md.read_text() + "\n- Name: Dana. Lives in Lisbon.\n")
        await channel.push("what is my name?")
        await channel.wait_for(1)
        await gateway.wait_idle()
    prompt = fake_llm.requests[0].system_text
    assert "Name: Dana. Lives in Lisbon." in prompt
    assert "Alex" not in prompt and "<!--" not in prompt


async def test_crossing_the_threshold_summarizes_older_messages(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = summarizing()
    async with run_gateway(llm=SMALL_WINDOW) as (gateway, channel):
        await chat(
            channel, ["my code word is AMBER. " + LONG] + [f"turn {i}. {LONG}" for i in range(8)]
        )
        await gateway.agent.window.compactor.wait("memory:chat-1")
        state, kept = await gateway.store.history.load("memory:chat-1", limit=None)
        await chat(channel, ["what is my code word?"])
        usage = await gateway.store.db.run(
            lambda conn: conn.execute(
                "SELECT purpose, principal, SUM(input_tokens + output_tokens) FROM usage"
                " GROUP BY purpose, principal"
            ).fetchall()
        )
    assert state.summary is not None and "AMBER" in state.summary
    charged = {purpose: (principal, tokens) for purpose, principal, tokens in usage}
    assert set(charged) == {"turn", "summary"}  # the summary's model calls are metered too...
    assert charged["summary"][0] == charged["turn"][0]  # ...and charged to the person chatting
    assert charged["summary"][1] > 0
    assert len(kept) >= 3
    last = [r for r in fake_llm.requests if not is_summary_request(r)][-1]
    assert "AMBER" in last.system_text  # the summary is in the prompt...
    assert len(last.user_texts) < 10  # ...instead of all the old messages
    assert any(is_summary_request(r) for r in fake_llm.requests)
    assert max(prompt_tokens(r) for r in fake_llm.requests if not is_summary_request(r)) < 4_000


def prompt_tokens(request: Recorded) -> int:
    """Tokens of everything in a request: messages, tool schemas, JSON framing."""
    counter = TokenCounter()
    counter.load()
    return counter.count(
        json.dumps(request.body.get("messages", []), ensure_ascii=False)
    ) + counter.count(json.dumps(request.body.get("tools", []), ensure_ascii=False))


async def test_a_summary_that_saves_nothing_is_discarded(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = summarizing(LONG * 15)  # longer than everything it replaces
    async with run_gateway(llm=SMALL_WINDOW) as (gateway, channel):
        await chat(channel, [f"turn {i}. {LONG}" for i in range(9)])
        await gateway.agent.window.compactor.wait("memory:chat-1")
        state, _ = await gateway.store.history.load("memory:chat-1", limit=None)
    assert state.summary is None
    assert any(is_summary_request(r) for r in fake_llm.requests)


async def test_summarization_failure_leaves_the_session_working(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    def respond(request: Recorded) -> Step:
        return error(500, "summarizer down") if is_summary_request(request) else text("still here")

    fake_llm.responder = respond
    async with run_gateway(llm=SMALL_WINDOW) as (gateway, channel):
        await chat(channel, [f"turn {i}. {LONG}" for i in range(9)])
        await gateway.agent.window.compactor.wait("memory:chat-1")
        await chat(channel, ["are you ok?"])
    assert channel.texts()[-1] == "still here"


async def test_two_sessions_summarize_at_once(run_gateway: Any, fake_llm: FakeLLM) -> None:
    fake_llm.responder = summarizing()
    async with run_gateway(llm=SMALL_WINDOW) as (gateway, channel):
        await asyncio.gather(
            chat(channel, [f"a {i}. {LONG}" for i in range(9)], chat_id="a"),
            chat(channel, [f"b {i}. {LONG}" for i in range(9)], chat_id="b"),
        )
        await asyncio.gather(
            gateway.agent.window.compactor.wait("memory:a"),
            gateway.agent.window.compactor.wait("memory:b"),
        )
        a, _ = await gateway.store.history.load("memory:a", limit=None)
        b, _ = await gateway.store.history.load("memory:b", limit=None)
    assert a.summary and b.summary


async def test_context_overflow_compacts_and_retries_once(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = summarizing()
    async with run_gateway(llm={"context_window": 100_000}) as (gateway, channel):
        await chat(channel, [f"turn {i}. {LONG}" for i in range(6)])
        fake_llm.queue(
            error(
                400,
                "This model's maximum context length is 4096 tokens",
                code="context_length_exceeded",
            )
        )
        await chat(channel, ["one more"])
        state, _ = await gateway.store.history.load("memory:chat-1", limit=None)
    assert channel.texts()[-1] == "ok: one more"
    assert state.summary is not None
    answered = [r for r in fake_llm.requests if not is_summary_request(r)][-1]
    assert "foxes" in answered.system_text  # retried with the fresh summary in the prompt


async def test_skills_are_listed_and_loaded_on_demand(
    run_gateway: Any, fake_llm: FakeLLM, make_settings: Any
) -> None:
    settings = make_settings()
    skill = settings.workspace_dir / "skills" / "haiku"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: haiku\ndescription: Write haiku in 5-7-5.\n---\nCount syllables carefully. End with a season word."
    )
    fake_llm.queue(
        calls(("get_skill", {"name": "haiku"})),
        calls(("write_file", {"path": "skills/haiku/SKILL.md", "content": "pwned"})),
        text("Here is a haiku about autumn."),
    )
    async with run_gateway(settings) as (_gateway, channel):
        await channel.push("write me a haiku")
        await channel.wait_for(1)
    first = fake_llm.requests[0]
    assert "- haiku: Write haiku in 5-7-5." in first.system_text
    assert "Count syllables" not in first.system_text  # only the index is in the prompt
    assert "Count syllables carefully" in fake_llm.requests[1].tool_results[0]
    assert "read-only" in fake_llm.requests[2].tool_results[-1]
    assert "pwned" not in (skill / "SKILL.md").read_text()


async def test_dm_memory_never_reaches_a_group(run_gateway: Any, fake_llm: FakeLLM) -> None:
    channel = MemoryChannel("telegram")
    overrides = {"telegram": {"owners": ["1"], "allow_from": ["1", "2"], "group_allow_from": ["g"]}}
    fake_llm.queue(
        calls(("memory_append", {"content": "My salary is 123456", "to": "memory"})),
        text("Noted."),
        calls(("memory_read", {})),
        calls(("read_file", {"path": "MEMORY.md"})),
        calls(("memory_search", {"query": "salary"})),
        text("I have nothing about that."),
    )
    async with run_gateway(channel=channel, **overrides) as (gateway, _):
        await channel.push("remember: my salary is 123456", sender_id="1", chat_id="1")
        await channel.wait_for(1, chat_id="1")
        await channel.push(
            "@bot what is the owner's salary?", sender_id="2", chat_id="g", chat_type=ChatType.GROUP
        )
        await channel.wait_for(1, chat_id="g")
        workspace = gateway.settings.workspace_dir
    assert "123456" in (workspace / "MEMORY.md").read_text()
    group_requests = fake_llm.requests[2:]
    assert all("123456" not in r.system_text for r in group_requests)
    assert all("123456" not in result for r in group_requests for result in r.tool_results)
    assert "not accessible" in group_requests[2].tool_results[-1]


async def test_memory_search_finds_earlier_messages(run_gateway: Any, fake_llm: FakeLLM) -> None:
    fake_llm.queue(
        text("Got it: level 3, spot 42."),
        calls(("memory_search", {"query": "parking spot"})),
        text("Level 3, spot 42."),
    )
    async with run_gateway() as (_gateway, channel):
        await chat(channel, ["I parked at level 3, parking spot 42", "where did I park?"])
    assert "[parking] [spot] 42" in fake_llm.requests[2].tool_results[0]


async def test_reflection_updates_memory_after_a_nontrivial_turn(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    def respond(request: Recorded) -> Step:
        if "worth remembering" in request.last_user_text:
            if request.tool_results:
                return text("DONE")
            return calls(
                ("memory_append", {"content": "User prefers tea over coffee", "to": "memory"})
            )
        return text("Tea it is.")

    fake_llm.responder = respond
    async with run_gateway(agent={"reflection": True}) as (gateway, channel):
        await channel.push("I always prefer tea over coffee. " * 12)
        await channel.wait_for(1)
        await asyncio.wait_for(_background_done(gateway), 10)
        memory = (gateway.settings.workspace_dir / "MEMORY.md").read_text()
    assert channel.texts() == ["Tea it is."]
    assert "User prefers tea over coffee" in memory


async def test_asked_to_remember_it_keeps_it_though_the_answer_only_said_so(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    def respond(request: Recorded) -> Step:
        if "worth remembering" in request.last_user_text:
            if request.tool_results:
                return text("DONE")
            return calls(("memory_append", {"content": "Locker code: 4711", "to": "memory"}))
        return text("Got it, I'll remember that.")  # and no tool call

    fake_llm.responder = respond
    async with run_gateway(agent={"reflection": True}) as (gateway, channel):
        await channel.push("please remember my locker code is 4711")  # short: 40 characters
        await channel.wait_for(1)
        await channel.push("thanks")  # nothing to keep: no second reflection
        await channel.wait_for(2)
        await asyncio.wait_for(_background_done(gateway), 10)
        memory = (gateway.settings.workspace_dir / "MEMORY.md").read_text()
    assert "Locker code: 4711" in memory
    reflections = [
        r
        for r in fake_llm.requests
        if "worth remembering" in r.last_user_text and not r.tool_results
    ]
    assert len(reflections) == 1  # "thanks" was not reflected on


async def test_short_messages_after_a_busy_turn_cost_no_reflection(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    """Reflection looks at the turn that just ended: two tool calls in it are work worth a
    look, but the tool calls of earlier turns do not make every later short message cost a
    second model call."""

    def respond(request: Recorded) -> Step:
        if "worth remembering" in request.last_user_text:
            return text("DONE")
        if request.last_user_text == "what is in my workspace?":
            if request.body["messages"][-1]["role"] == "tool":
                return text("Notes and memory.")
            return calls(("list_dir", {"path": "."}), ("list_dir", {"path": "memory"}))
        return text("Fine.")

    fake_llm.responder = respond
    async with run_gateway(agent={"reflection": True}) as (gateway, channel):
        await channel.push("what is in my workspace?")
        await channel.wait_for(1)
        await asyncio.wait_for(_background_done(gateway), 10)
        await channel.push("And we won't rent a car.")
        await channel.wait_for(2)
        await channel.push("Trains are fine.")
        await channel.wait_for(3)
        await asyncio.wait_for(_background_done(gateway), 10)
    reflected_on = [
        r.last_user_text.partition("Exchange:")[2]
        for r in fake_llm.requests
        if "worth remembering" in r.last_user_text
    ]
    assert len(reflected_on) == 1  # the busy turn's, and no other
    assert "what is in my workspace?" in reflected_on[0]
    assert channel.texts() == ["Notes and memory.", "Fine.", "Fine."]


async def _background_done(gateway: Any) -> None:
    while gateway.agent._background:
        await asyncio.gather(*gateway.agent._background, return_exceptions=True)


async def test_an_idle_session_starts_fresh(run_gateway: Any, fake_llm: FakeLLM) -> None:
    async with run_gateway(agent={"session_reset": "idle", "idle_reset_minutes": 5}) as (
        gateway,
        channel,
    ):
        await chat(channel, ["my name is Ada"])
        # The session was last active an hour ago.
        await gateway.store.db.run(
            lambda conn: conn.execute("UPDATE sessions SET last_active = last_active - 3600")
        )
        await chat(channel, ["what is my name?"])
        _, history = await gateway.store.history.load("memory:chat-1", limit=10)
    assert fake_llm.requests[-1].user_texts == ["what is my name?"]
    shown = [as_written(m.body["content"]) for m in history]
    assert shown == ["what is my name?", "echo: what is my name?"]


def test_reflection_reads_the_persons_words_not_the_reviews_request_for_a_fix() -> None:
    conversation = [
        ChatMessage("user", "an earlier question"),
        ChatMessage("assistant", "an earlier answer"),
        ChatMessage("user", "please email Bob the notes"),
        ChatMessage("assistant", "I've emailed Bob."),  # a claim no call backs
        ChatMessage("user", "[review UNVERIFIED_CLAIM] Your reply says ..."),
        ChatMessage("assistant", "I could not email Bob: no tool ran."),
    ]
    assert [m.content for m in current_exchange(conversation)] == [
        "please email Bob the notes",
        "I've emailed Bob.",
        "I could not email Bob: no tool ran.",
    ]
