"""Agents find each other: the prompt names the other agents, what each does and whom this
one may message; one send_to_agent call can ask several at once."""

from __future__ import annotations

from channels.memory import MemoryChannel
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, Recorded, Step, calls, text

THREE_AGENTS = {
    "agents": {
        "work": {
            "name": "WorkBot",
            "description": "Knows the office calendar",
            "may_message": ["main"],
        },
        "billing": {"name": "BillBot", "persona": "Handles invoices.\nBe precise."},
    },
    "routes": [{"agent": "work", "chat": "office"}, {"agent": "billing", "chat": "accounts"}],
    "agent_messages": {
        "main_may_message": ["work", "billing"],
        "main_description": "The family assistant",
    },
}


def agent_in(request: Recorded) -> str:
    for name, marker in (("work", "WorkBot"), ("billing", "BillBot")):
        if f"You are {marker}" in request.system_text:
            return name
    return "main"


async def test_the_prompt_names_the_other_agents_and_whom_it_may_message(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = make_settings(**THREE_AGENTS)
    channel = MemoryChannel()
    async with Gateway(settings, channels=[channel]) as gateway:
        await channel.push("hi")
        await channel.wait_for(1)
        await channel.push("hi", chat_id="office")
        await channel.wait_for(1, chat_id="office")
        await gateway.wait_idle()
    main, work = fake_llm.requests[0].system_text, fake_llm.requests[1].system_text
    assert "- work: Knows the office calendar. (you may message it)" in main
    assert "- billing: Handles invoices. (you may message it)" in main
    assert "- main: The family assistant. (you may message it)" in work
    assert "- billing: Handles invoices. (you may not message it)" in work
    assert "- work:" not in work  # not itself


async def test_one_message_reaches_several_agents_and_each_answer_comes_back(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    def respond(request: Recorded) -> Step:
        me = agent_in(request)
        if me == "work":
            return text("Work: the offsite is on Friday.")
        if me == "billing":
            return text("Billing: the venue invoice is paid.")
        latest = request.last_user_text
        if "[message from agent" in latest:
            return text("Relayed: " + latest.splitlines()[-1])
        if request.tool_results:
            return text("I asked work and billing.")
        return calls(
            (
                "send_to_agent",
                {"agents": ["work", "billing"], "content": "Anything on the offsite?"},
            )
        )

    fake_llm.responder = respond
    settings = make_settings(**THREE_AGENTS)
    channel = MemoryChannel()
    async with Gateway(settings, channels=[channel]) as gateway:
        await channel.push("ask work and billing about the offsite")
        await channel.wait_for(3)
        await gateway.wait_idle()
    asked = sorted(
        agent_in(r) for r in fake_llm.requests if "Anything on the offsite?" in r.last_user_text
    )
    assert asked == ["billing", "work"]
    assert sorted(channel.texts()) == [
        "I asked work and billing.",
        "Relayed: Billing: the venue invoice is paid.",
        "Relayed: Work: the offsite is on Friday.",
    ]


async def test_nothing_is_sent_when_one_of_several_agents_is_off_limits(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = make_settings(**{**THREE_AGENTS, "agent_messages": {"main_may_message": ["work"]}})
    fake_llm.queue(
        calls(("send_to_agent", {"agents": ["work", "billing"], "content": "hi"})),
        text("I may only ask work."),
    )
    channel = MemoryChannel()
    async with Gateway(settings, channels=[channel]) as gateway:
        await channel.push("ask both")
        await channel.wait_for(1)
        await gateway.wait_idle()
        refusals = await gateway.store.audit.recent(kind="agent-policy")
    result = fake_llm.requests[1].tool_results[0]
    assert "may not message agent 'billing'" in result and "Nothing was sent" in result
    assert [r.detail["target"] for r in refusals] == ["billing"]
    assert len(fake_llm.requests) == 2  # neither agent got a turn
