"""In control while it works: /stop, /status and /new answered beside a running turn,
follow-ups that steer it, and edits, through the real gateway with the fake model."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

from agent.tools.base import Effect, Tool, ToolContext, ToolResult, schema
from channels.memory import MemoryChannel
from gateway.core.messages import ChatType, OutboundKind
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory, edit_applied
from tests.fakes.llm import FakeLLM, Recorded, Step, calls, held, text


async def stop_taken(gateway: Gateway) -> None:
    """The /stop is handled: only the running turn's own message is still open."""

    async def handled() -> bool:
        return await gateway.store.journal.open_count() == 1

    async with asyncio.timeout(10):
        await gateway.bus.wait_until(handled)


async def queued(gateway: Gateway, count: int) -> None:
    """``count`` messages wait in the dispatcher (behind the running turn)."""

    async def waiting() -> bool:
        return gateway.dispatcher.queued_messages >= count

    async with asyncio.timeout(10):
        await gateway.bus.wait_until(waiting)


class Gated(Tool):
    """A tool that runs until the test opens its gate; ``effect`` says whether it changes
    anything (a change runs to its end; a read is cut by a stop)."""

    name: ClassVar[str] = "gated"
    description: ClassVar[str] = "wait for the gate"
    parameters: ClassVar[dict[str, Any]] = schema({"path": {"type": "string"}})
    effect: ClassVar[Effect] = Effect.WRITE
    targets: ClassVar[tuple[str, ...]] = ("path",)

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.started = asyncio.Event()
        self.runs = 0

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.runs += 1
        self.started.set()
        await self.gate.wait()
        return ToolResult("done")


async def test_stop_cuts_a_long_model_call_and_drops_what_waits_behind_it(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    gate = asyncio.Event()
    fake_llm.queue(held(gate, "the answer nobody should see"))
    async with run_gateway() as (gateway, channel):
        await channel.push("write me a long essay")
        await fake_llm.wait_for_requests(1)
        await channel.push("and also this")  # waits behind the running turn
        await channel.push("/stop")
        [stopped] = await channel.wait_for(1, max_wait=5)
        gate.set()  # the model finishes after all: its answer must not arrive
        await channel.push("hello again")
        replies = await channel.wait_for(2)
        await gateway.wait_idle()
    assert stopped.kind is OutboundKind.NOTICE
    assert stopped.text.startswith("Stopped. Nothing had been changed.")
    assert "The message you sent after it was dropped." in stopped.text
    assert [m.text for m in replies] == [stopped.text, "echo: hello again"]
    assert fake_llm.requests[-1].user_texts[-1] == "hello again"
    assert "and also this" not in str(fake_llm.requests[-1].body)


async def test_stop_after_a_side_effect_says_what_was_already_done(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    tool = Gated()

    def respond(request: Recorded) -> Step:
        if "what happened" in request.last_user_text:
            return text("I stopped after the first step.")
        return calls(("gated", {"path": "plan.md"}))  # five steps, one after the other

    fake_llm.responder = respond
    channel = MemoryChannel()
    async with Gateway(make_settings(), channels=[channel], extra_tools=[tool]) as gateway:
        await channel.push("do the five steps")
        await tool.started.wait()
        await channel.push("/stop")
        await stop_taken(gateway)  # the tool is still in its side effect
        tool.gate.set()  # a call with a side effect runs to its end, then the turn stops
        [stopped] = await channel.wait_for(1)
        await gateway.wait_idle()
        await channel.push("what happened?")
        await channel.wait_for(2)
        await gateway.wait_idle()
    # what it acted on named too: the file it wrote
    assert stopped.text.startswith("Stopped. Already done before the stop: gated plan.md.")
    assert tool.runs == 1  # the second step never ran
    assert len(fake_llm.requests) == 2  # the first step's call, and "what happened?"
    history = str(fake_llm.requests[-1].body)
    # it stays in history, as a mark rather than the notice (which the model would imitate)
    assert "[the person stopped this answer here; already done: gated plan.md]" in history
    assert "Stopped. Already done" not in history


async def test_status_is_answered_while_the_turn_runs(run_gateway: Any, fake_llm: FakeLLM) -> None:
    gate = asyncio.Event()
    fake_llm.queue(held(gate, "finally done"))
    token = {"name": "ops", "token": "owner-token-0123456789abcdef", "role": "owner"}
    api = {"enabled": True, "tokens": [token]}  # with the task API's internal channel
    async with run_gateway(web={"port": 0}, api=api) as (gateway, channel):
        await channel.push("think hard")
        await fake_llm.wait_for_requests(1)
        await channel.push("/status")
        [status] = await channel.wait_for(1, max_wait=5)
        gate.set()
        replies = await channel.wait_for(2)
        await gateway.wait_idle()
    assert "Now: thinking for" in status.text
    assert "Other turns running: 0 ·" in status.text
    assert "Context: about" in status.text and "Today: you" in status.text
    [channels] = [line for line in status.text.splitlines() if line.startswith("Channels:")]
    assert channels == "Channels: memory, api"  # what people and programs use: no "task"
    assert replies[1].text == "finally done"


async def test_a_members_status_does_not_list_the_gateways_channels(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    """Which platforms the gateway serves is the owner's business, not a member's."""
    telegram = MemoryChannel("telegram")
    access = {"owners": ["1"], "allow_from": ["2"]}
    token = {"name": "ops", "token": "owner-token-0123456789abcdef", "role": "owner"}
    api = {"enabled": True, "tokens": [token]}
    async with run_gateway(channel=telegram, telegram=access, api=api):
        await telegram.push("/status", sender_id="2", chat_id="2")
        [member] = await telegram.wait_for(1, chat_id="2")
        await telegram.push("/status", sender_id="1", chat_id="1")
        [owner] = await telegram.wait_for(1, chat_id="1")
    assert "Channels:" not in member.text and "api" not in member.text
    assert "Today: you" in member.text  # what is theirs stays
    assert "Channels: telegram, api" in owner.text


async def test_new_stops_the_running_turn_then_starts_afresh(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    gate = asyncio.Event()
    fake_llm.queue(text("noted: heron"), held(gate, "never delivered"))
    async with run_gateway() as (gateway, channel):
        await channel.push("the code word is heron")
        await channel.wait_for(1)
        await channel.push("now think for a long time")
        await fake_llm.wait_for_requests(2)
        await channel.push("/new")
        replies = await channel.wait_for(3, max_wait=5)
        gate.set()
        await channel.push("what was the code word?")
        await channel.wait_for(4)
        await gateway.wait_idle()
    assert replies[1].text.startswith("Stopped.")
    assert "fresh conversation" in replies[2].text
    assert fake_llm.requests[-1].user_texts == ["what was the code word?"]
    assert "never delivered" not in channel.texts()


async def test_in_a_group_only_the_owner_and_an_admin_may_start_afresh(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(text("noted: heron"), text("heron"), text("I don't know."))
    group = {"allow_from": ["*"], "group_allow_from": ["g"], "admins": ["boss"]}
    channel = MemoryChannel("telegram")

    async def say(words: str, sender: str, count: int) -> str:
        await channel.push(words, sender_id=sender, chat_id="g", chat_type=ChatType.GROUP)
        return (await channel.wait_for(count))[-1].text

    async with run_gateway(channel=channel, telegram=group) as (gateway, _):
        await say("the code word is heron", "ana", 1)
        refused = await say("/new", "bob", 2)  # a member
        await say("what was the code word?", "ana", 3)
        kept = fake_llm.requests[-1].user_texts
        fresh = await say("/new", "boss", 4)  # an admin
        await say("what was the code word?", "ana", 5)
        await gateway.wait_idle()
    assert refused == (
        "Only the owner or an admin can start a fresh conversation in this group, because "
        "it is everyone's conversation. It goes on as it is."
    )
    assert "heron" in kept[0] and len(kept) == 2  # bob's /new changed nothing
    assert fresh.startswith("Started a fresh conversation.")
    [asked] = fake_llm.requests[-1].user_texts  # after the admin's: a fresh conversation
    assert "heron" not in asked


async def test_the_owner_may_start_a_group_afresh_and_members_where_the_setting_says(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(text("noted"), text("noted"), text("noted"))
    group = {"allow_from": ["*"], "group_allow_from": ["g", "h"], "owners": ["olga"]}
    members_may = {**group, "new_in_groups": "members"}
    answers: list[str] = []
    for section, chat, by in (
        (group, "g", "olga"),  # the owner, in a group
        (members_may, "h", "bob"),  # a member, where new_in_groups = "members"
        (group, "bob-dm", "bob"),  # a member, in his own direct chat
    ):
        channel = MemoryChannel("telegram")
        kind = ChatType.DM if chat == "bob-dm" else ChatType.GROUP
        where: dict[str, Any] = {"chat_id": chat, "chat_type": kind}
        async with run_gateway(channel=channel, telegram=section) as (gateway, _):
            await channel.push("heron", sender_id="bob", message_id=f"{chat}-1", **where)
            await channel.wait_for(1)
            await channel.push("/new", sender_id=by, message_id=f"{chat}-2", **where)
            answers.append((await channel.wait_for(2))[-1].text)
            await gateway.wait_idle()
    assert all(a.startswith("Started a fresh conversation.") for a in answers), answers


async def test_a_stop_phrase_stops_and_only_the_asker_or_an_admin_may(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    gate = asyncio.Event()
    fake_llm.queue(held(gate))
    group = {"allow_from": ["*"], "group_allow_from": ["g"], "admins": ["boss"]}
    channel = MemoryChannel("telegram")
    async with run_gateway(channel=channel, telegram=group) as (gateway, _):
        await channel.push(
            "summarise the thread", sender_id="ana", chat_id="g", chat_type=ChatType.GROUP
        )
        await fake_llm.wait_for_requests(1)
        await channel.push("/stop", sender_id="bob", chat_id="g", chat_type=ChatType.GROUP)
        [refused] = await channel.wait_for(1)
        await channel.push("Stop!", sender_id="boss", chat_id="g", chat_type=ChatType.GROUP)
        [_, stopped] = await channel.wait_for(2)
        gate.set()
        await gateway.wait_idle()
    assert refused.text == "Only the person who asked, an admin or the owner can stop this."
    assert stopped.text.startswith("Stopped.")
    assert len(channel.sent) == 2


async def test_a_follow_up_during_a_tool_chain_reaches_the_next_model_call(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    tool = Gated()
    tool_effect = Effect.READ
    Gated.effect = tool_effect  # a read: the follow-up arrives while it runs

    def respond(request: Recorded) -> Step:
        if not request.tool_results:
            return calls(("gated", {}))
        return text(f"answered, taking into account: {request.last_user_text}")

    fake_llm.responder = respond
    channel = MemoryChannel()
    try:
        async with Gateway(make_settings(), channels=[channel], extra_tools=[tool]) as gateway:
            await channel.push("list the files")
            await tool.started.wait()
            await channel.push("no, only the notes folder")
            await queued(gateway, 1)  # it waits for the next tool boundary
            tool.gate.set()
            [answer] = await channel.wait_for(1)
            await gateway.wait_idle()
    finally:
        Gated.effect = Effect.WRITE
    assert "only the notes folder" in answer.text
    assert "Follow-up" in fake_llm.requests[-1].last_user_text
    assert len(channel.sent) == 1  # one answer, no second turn for the follow-up
    assert len(fake_llm.requests) == 2


async def test_a_follow_up_survives_a_crash_and_is_answered_once(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    tool = Gated()
    Gated.effect = Effect.READ
    settings = make_settings()
    second = asyncio.Event()
    fake_llm.queue(calls(("gated", {})), held(second, "late"))
    channel = MemoryChannel()
    try:
        async with Gateway(settings, channels=[channel], extra_tools=[tool]) as gateway:
            await channel.push("list the files")
            await tool.started.wait()
            await channel.push("only the notes folder, please")
            await queued(gateway, 1)
            tool.gate.set()
            await fake_llm.wait_for_requests(2)  # the follow-up joined the second call
            await gateway.stop(drain_timeout=0)  # a crash while the model answers
        fake_llm.queue(text("notes folder: 3 files"))
        channel = MemoryChannel()
        async with Gateway(settings, channels=[channel], extra_tools=[Gated()]) as gateway:
            replies = await channel.wait_for(1)
            await gateway.wait_idle()
    finally:
        Gated.effect = Effect.WRITE
    assert [m.text for m in replies] == ["notes folder: 3 files"]
    assert "only the notes folder" in fake_llm.requests[-1].last_user_text
    assert len(fake_llm.requests) == 3


async def test_edits_replace_steer_or_are_ignored(run_gateway: Any, fake_llm: FakeLLM) -> None:
    gate = asyncio.Event()
    fake_llm.queue(text("first done"), held(gate, "second done"))
    async with run_gateway() as (gateway, channel):
        await channel.push("first", message_id="a")
        await channel.wait_for(1)
        await gateway.wait_idle()
        await channel.push("frist, edited", message_id="a-edit", edit_of="a")  # answered
        await channel.push("second", message_id="b")
        await fake_llm.wait_for_requests(2)
        await channel.push("third", message_id="c")  # waits
        await channel.push("third, corrected", message_id="c-edit", edit_of="c")
        await edit_applied(gateway, "memory", "c")
        gate.set()
        replies = await channel.wait_for(3)
        await gateway.wait_idle()
    assert [m.text for m in replies][:2] == ["first done", "second done"]
    assert "third, corrected" in fake_llm.requests[2].last_user_text
    assert "third" not in fake_llm.requests[2].user_texts  # replaced, not answered too
    assert all("frist" not in r.last_user_text for r in fake_llm.requests)
    assert len(fake_llm.requests) == 3


async def test_model_lists_and_switches_this_chats_model(
    make_settings: SettingsFactory, fake_llm: FakeLLM, backup_llm: FakeLLM
) -> None:
    fallback = {"model": "backup-model", "base_url": backup_llm.openai_url, "api_key": "sk-b"}
    settings = make_settings(llm={"fallbacks": [fallback]})
    channel = MemoryChannel()
    async with Gateway(settings, channels=[channel]) as gateway:
        for text_ in ("/model", "/model backup-model", "hello there", "/model default", "hi"):
            await channel.push(text_)
            await channel.wait_for(len(channel.sent) + 1)
        await gateway.wait_idle()
    listing, switched, answer, back, _ = channel.texts()
    assert listing.startswith("Models: fake-model (default) ← this chat, backup-model.")
    assert switched == "This chat uses backup-model from now on (/model default to go back)."
    assert answer == "echo: hello there"
    assert [r.last_user_text for r in backup_llm.requests] == ["hello there"]
    assert back == "This chat uses the default model again: fake-model."
    assert fake_llm.requests[-1].last_user_text == "hi"


async def test_model_is_for_the_owner_and_admins(run_gateway: Any, fake_llm: FakeLLM) -> None:
    channel = MemoryChannel("telegram")
    async with run_gateway(channel=channel, telegram={"allow_from": ["*"]}) as (_gw, _):
        await channel.push("/model", sender_id="guest", chat_id="guest")
        [refused] = await channel.wait_for(1)
    assert refused.text == "Only the owner or an admin can switch the model."


async def test_compact_summarises_now_and_says_what_it_saved(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    async with run_gateway() as (gateway, channel):
        for i in range(8):
            await channel.push(f"fact number {i}: " + "the sky is blue today. " * 40)
            await channel.wait_for(i + 1)
        await gateway.wait_idle()
        fake_llm.queue(text("You noted eight facts about the sky being blue."))
        await channel.push("/compact")
        [*_, compacted] = await channel.wait_for(9)
        await channel.push("what did I tell you?")
        await channel.wait_for(10)
        await gateway.wait_idle()
    assert compacted.text.startswith("Compacted: ")
    assert "saved" in compacted.text
    assert "eight facts" in fake_llm.requests[-1].system_text
    assert len(fake_llm.requests[-1].user_texts) < 9


async def test_usage_shows_today_this_month_and_the_limits(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    channel = MemoryChannel("telegram")
    access = {"allow_from": ["*"]}
    limits = {"user_daily_tokens": 50_000, "user_turns_per_hour": 30}
    async with run_gateway(channel=channel, telegram=access, limits=limits) as (gateway, _):
        await channel.push("hello", sender_id="amy", chat_id="amy")
        await channel.wait_for(1)
        await gateway.wait_idle()
        await channel.push("/usage", sender_id="amy", chat_id="amy")
        [_, usage] = await channel.wait_for(2)
    lines = usage.text.splitlines()
    assert lines[0] == "Your usage:"
    assert lines[1].startswith("- today: ") and "in 1 turn" in lines[1]
    assert lines[2].startswith("- this month: ")
    assert lines[3] == "Limits: 50,000 tokens a day and 30 turns an hour."


async def test_an_edit_of_the_message_being_answered_gets_answered_too(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    gate = asyncio.Event()
    fake_llm.queue(held(gate, "a table for two it is"), text("changed it to four"))
    async with run_gateway() as (gateway, channel):
        await channel.push("book a table for two", message_id="a")
        await fake_llm.wait_for_requests(1)
        await channel.push("book a table for four", message_id="a-edit", edit_of="a")
        gate.set()
        replies = await channel.wait_for(2)
        async with asyncio.timeout(10):
            await gateway.wait_idle()  # nothing left open
    assert [m.text for m in replies] == ["a table for two it is", "changed it to four"]
    assert fake_llm.requests[1].last_user_text.startswith("[edited")
