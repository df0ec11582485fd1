"""A message in, one durable answer out: the whole pipeline through a MemoryChannel."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from channels.memory import MemoryChannel
from gateway.core.bus import Accepted
from gateway.core.messages import ChatRef, ChatType, OutboundKind
from gateway.runtime.turns import live
from tests.fakes.llm import FakeLLM, Step, calls, error, held, text


async def test_a_message_gets_one_answer(run_gateway: Any, fake_llm: FakeLLM) -> None:
    async with run_gateway() as (gateway, channel):
        assert await channel.push("hello there") is Accepted.NEW
        [reply] = await channel.wait_for(1)
        await gateway.wait_idle()
    assert reply.text == "echo: hello there"
    assert reply.kind is OutboundKind.REPLY
    assert len(fake_llm.requests) == 1
    assert "Switchboard" in fake_llm.requests[0].system_text


async def test_the_same_platform_message_twice_makes_one_turn(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    async with run_gateway() as (gateway, channel):
        assert await channel.push("hi", message_id="42") is Accepted.NEW
        assert await channel.push("hi", message_id="42") is Accepted.DUPLICATE
        await channel.wait_for(1)
        await gateway.wait_idle()
    assert len(channel.sent) == 1
    assert len(fake_llm.requests) == 1


async def test_history_carries_into_the_next_turn(run_gateway: Any, fake_llm: FakeLLM) -> None:
    async with run_gateway() as (_gateway, channel):
        await channel.push("my name is Dana")
        await channel.wait_for(1)
        await channel.push("what is my name?")
        await channel.wait_for(2)
    second = fake_llm.requests[1]
    assert second.user_texts == ["my name is Dana", "what is my name?"]


async def test_tool_loop_writes_and_reads_a_file(run_gateway: Any, fake_llm: FakeLLM) -> None:
    fake_llm.queue(
        calls(("write_file", {"path": "notes/todo.txt", "content": "buy milk"})),
        calls(("read_file", {"path": "notes/todo.txt"})),
        text("Saved your todo: buy milk"),
    )
    async with run_gateway() as (gateway, channel):
        await channel.push("remember to buy milk")
        [reply] = await channel.wait_for(1)
        workspace = gateway.settings.workspace_dir
    assert reply.text == "Saved your todo: buy milk"
    assert (workspace / "notes" / "todo.txt").read_text() == "buy milk"
    assert fake_llm.requests[2].tool_results[-1] == "buy milk"


async def test_message_tool_is_not_repeated_by_the_final_answer(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(calls(("message", {"content": "The answer is 42."})), text("The answer is 42."))
    async with run_gateway() as (gateway, channel):
        await channel.push("what is the answer?")
        await channel.wait_for(1)
        await gateway.wait_idle()
    assert channel.texts() == ["The answer is 42."]
    assert channel.sent[0].kind is OutboundKind.PROGRESS


async def test_messages_for_a_busy_chat_are_folded_in_order(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    gate = asyncio.Event()
    fake_llm.queue(held(gate, "first answer"))
    async with run_gateway() as (gateway, channel):
        await channel.push("one")
        await fake_llm.wait_for_requests(1)
        await channel.push("two")
        await channel.push("three")
        gate.set()
        await channel.wait_for(2)
        await gateway.wait_idle()
    assert channel.texts() == ["first answer", "echo: three"]
    assert fake_llm.requests[1].user_texts == ["one", "two", "three"]


async def test_a_stuck_chat_does_not_block_other_chats(run_gateway: Any, fake_llm: FakeLLM) -> None:
    gate = asyncio.Event()
    fake_llm.queue(held(gate, "slow answer"))
    async with run_gateway() as (_gateway, channel):
        await channel.push("slow question", chat_id="a")
        await fake_llm.wait_for_requests(1)
        await channel.push("quick question", chat_id="b")
        [quick] = await channel.wait_for(1, chat_id="b")
        assert channel.texts("a") == []  # chat a is still waiting on its model call
        gate.set()
        [slow] = await channel.wait_for(1, chat_id="a")
    assert quick.text == "echo: quick question"
    assert slow.text == "slow answer"


async def test_provider_failure_gives_a_clear_notice_and_keeps_the_message(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(error(500, "upstream exploded"))
    async with run_gateway() as (_gateway, channel):
        await channel.push("are you there?")
        [notice] = await channel.wait_for(1)
        await channel.push("and now?")
        await channel.wait_for(2)
    assert notice.kind is OutboundKind.NOTICE
    assert "could not answer" in notice.text
    assert fake_llm.requests[1].user_texts == ["are you there?", "and now?"]


async def test_turn_time_limit_ends_with_a_notice(run_gateway: Any, fake_llm: FakeLLM) -> None:
    gate = asyncio.Event()
    fake_llm.queue(held(gate))
    async with run_gateway(agent={"turn_timeout_seconds": 0.3}) as (_gateway, channel):
        await channel.push("take forever")
        [notice] = await channel.wait_for(1)
        gate.set()
    assert notice.kind is OutboundKind.NOTICE
    assert "took too long" in notice.text


async def test_commands_are_answered_without_the_model(run_gateway: Any, fake_llm: FakeLLM) -> None:
    async with run_gateway() as (_gateway, channel):
        await channel.push("remember: blue")
        await channel.wait_for(1)
        await channel.push("/new")
        await channel.wait_for(2)
        await channel.push("/status")
        await channel.wait_for(3)
        await channel.push("hello again")
        await channel.wait_for(4)
    assert "fresh conversation" in channel.texts()[1]
    # not counting /status itself, neither as a turn nor as a message waiting for one
    assert "Other turns running: 0 · messages waiting for a turn: 0" in channel.texts()[2]
    assert "Messages to send: none waiting" in channel.texts()[2]
    assert len(fake_llm.requests) == 2
    assert fake_llm.requests[1].user_texts == ["hello again"]  # /new dropped the old context


async def test_an_unknown_command_is_answered_not_sent_to_the_model(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    async with run_gateway() as (_gateway, channel):
        await channel.push("/foo bar")
        await channel.wait_for(1)
        await channel.push("/tmp/x is full")  # a path, not a command: the model answers
        await channel.wait_for(2)
        await channel.push("/foo", chat_id="group-1", chat_type=ChatType.GROUP)  # another bot's?
        await channel.wait_for(3)
    unknown = channel.texts()[0]
    assert unknown.startswith("I don't know the command /foo.")
    assert "/help - list commands" in unknown
    assert [r.last_user_text for r in fake_llm.requests] == ["/tmp/x is full", "[User] /foo"]


class StreamingChannel(MemoryChannel):
    def __init__(self) -> None:
        super().__init__("stream")
        self.deltas: list[tuple[str, str]] = []

    async def stream(self, chat: ChatRef, turn_id: str, delta: str) -> None:
        self.deltas.append((turn_id, delta))


async def test_streaming_channels_see_the_answer_as_it_is_generated(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    channel = StreamingChannel()
    fake_llm.queue(Step(text="a streamed answer in pieces", stream_chunks=4))
    async with run_gateway(channel=channel) as (_, _channel):
        await channel.push("stream please")
        [reply] = await channel.wait_for(1)
    assert len(channel.deltas) > 1
    assert "".join(d for _, d in channel.deltas) == reply.text == "a streamed answer in pieces"
    assert {turn for turn, _ in channel.deltas} == {reply.turn_id}
    assert fake_llm.requests[0].body.get("stream") is True


class SlowTypingChannel(MemoryChannel):
    """A platform whose typing requests hang until released."""

    def __init__(self) -> None:
        super().__init__()
        self.typing_in_flight = 0
        self.release_typing = asyncio.Event()

    async def typing(self, chat: ChatRef) -> None:
        self.typing_in_flight += 1
        try:
            await self.release_typing.wait()
        finally:
            self.typing_in_flight -= 1
        await super().typing(chat)


async def test_a_stampede_of_slow_turns_sends_few_typing_indicators_at_once(
    run_gateway: Callable[..., Any], fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(live, "TYPING_DELAY", 0.0)  # every turn wants "typing" at once
    monkeypatch.setattr(live, "TYPING_INTERVAL", 600.0)  # ...and only once
    release = asyncio.Event()
    for _ in range(10):
        fake_llm.queue(held(release, "done"))
    channel = SlowTypingChannel()
    async with run_gateway(channel=channel) as (gateway, _):
        for i in range(10):
            await channel.push("slow one", chat_id=f"c{i}", sender_id=f"u{i}")
        await fake_llm.wait_for_requests(10)  # all ten turns are running
        in_flight = channel.typing_in_flight
        channel.release_typing.set()
        release.set()
        await channel.wait_for(10)
        await gateway.wait_idle()
    assert in_flight == live.TYPING_MAX_IN_FLIGHT  # the others did not pile on
    assert len(channel.texts()) == 10  # and every answer went out
