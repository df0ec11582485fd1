"""Every model call is counted and capped: page condensing, the reviewer, reflection and
summaries are recorded with their purpose and the person they are charged to, the per-turn
token cap counts them, and one concurrency cap per model endpoint holds for all of them."""

from __future__ import annotations

import asyncio
from typing import Any

from channels.memory import MemoryChannel
from gateway.core.messages import OutboundKind
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, Recorded, Step, calls, text
from tests.fakes.web import FakeSite

MEMBER = {"telegram": {"owners": ["1"], "allow_from": ["1", "3"]}}


def long_page(paragraphs: int) -> str:
    body = "".join(
        f"<p>Paragraph {n}: tomatoes grow best in warm soil with steady water and sun.</p>"
        for n in range(paragraphs)
    )
    return f"<html><head><title>Long</title></head><body><article>{body}</article></body></html>"


def is_page_part(request: Recorded) -> bool:
    return "<excerpt>" in request.last_user_text


def web(**extra: Any) -> dict[str, Any]:
    return {"web": {"allow_private_hosts": ["127.0.0.1"], "page_token_budget": 250, **extra}}


async def test_every_model_call_is_recorded_with_its_purpose_and_payer(
    run_gateway: Any, make_settings: SettingsFactory, fake_llm: FakeLLM, site: FakeSite
) -> None:
    site.page("/long", long_page(60))
    url = site.url("/long")

    def respond(request: Recorded) -> Step:
        if is_page_part(request):
            return text("Tomatoes like warm soil.")
        if "You review an assistant's reply" in request.last_user_text:
            return text("PASS")
        if "worth remembering" in request.last_user_text:
            return text("DONE")
        if "my garden" in request.last_user_text:
            return text("A sunny garden suits tomatoes.")
        if not request.tool_results:
            return calls(("web_fetch", {"url": url}))
        return text("Tomatoes like warm soil and steady water.")

    fake_llm.responder = respond
    settings = make_settings(
        tools=web(chunk_tokens=500, max_chunks=3),
        agent={"reflection": True, "llm_review": True},
        **MEMBER,
    )
    channel = MemoryChannel("telegram")
    async with run_gateway(settings, channel=channel) as (gateway, _):
        await channel.push("read " + url, sender_id="3", chat_id="3")
        await channel.wait_for(1)
        # A long message is worth reflecting on (the page turn is not: it read outside text).
        await channel.push("my garden gets sun all day. " * 12, sender_id="3", chat_id="3")
        await channel.wait_for(2)
        await gateway.wait_idle()
        await gateway.agent.settle()  # reflection runs after the turn
        usage = gateway.store.usage
        rows = await gateway.store.db.run(
            lambda conn: conn.execute(
                "SELECT purpose, principal, turn_id, input_tokens + output_tokens FROM usage"
            ).fetchall()
        )
        [day] = await usage.since(3_600)
        person = await usage.by_principal("telegram:3", since=0, turns_since=0)
    assert channel.texts() == [
        "Tomatoes like warm soil and steady water.",
        "A sunny garden suits tomatoes.",
    ]
    assert {purpose for purpose, *_ in rows} == {"turn", "page", "review", "reflection"}
    assert {principal for _, principal, *_ in rows} == {"telegram:3"}
    assert len({turn for _, _, turn, _ in rows}) == 2  # reflection names the turn it followed
    everything = sum(fake_llm.reported)  # what the server said each call used
    assert sum(tokens for *_, tokens in rows) == everything
    assert day.input_tokens + day.output_tokens == everything and day.turns == 2
    assert person.tokens == everything and person.turns == 2  # the daily allowance sees it all


async def test_the_turn_token_cap_counts_page_condensing(
    run_gateway: Any, make_settings: SettingsFactory, fake_llm: FakeLLM, site: FakeSite
) -> None:
    site.page("/long", long_page(400))
    url = site.url("/long")
    fake_llm.responder = lambda request: (
        text("Condensed part.") if is_page_part(request) else text("Here is the summary.")
    )
    fake_llm.queue(calls(("web_fetch", {"url": url})))
    settings = make_settings(tools=web(chunk_tokens=1_000), agent={"max_turn_tokens": 6_000})
    async with run_gateway(settings) as (gateway, channel):
        await channel.push("summarize " + url)
        [reply] = await channel.wait_for(1)
        await gateway.wait_idle()
    parts = [r for r in fake_llm.requests if is_page_part(r)]
    assert len(parts) == 8 and fake_llm.reported[0] < 6_000 < sum(fake_llm.reported)
    assert reply.kind is OutboundKind.NOTICE and "token budget" in reply.text
    assert len(fake_llm.requests) == 1 + len(parts)  # no model call after the cap was passed


async def test_one_concurrency_cap_per_endpoint_holds_for_page_condensing_and_agents(
    run_gateway: Any, make_settings: SettingsFactory, site: FakeSite
) -> None:
    fake = await FakeLLM(latency=0.05).start()  # answers overlap unless the cap holds
    try:
        site.page("/long", long_page(400))
        url = site.url("/long")
        fake.responder = lambda request: (
            text("Condensed part.")
            if is_page_part(request)
            else text("Tomatoes like warm soil.")
            if request.tool_results
            else calls(("web_fetch", {"url": url}))
        )
        settings = make_settings(
            llm={"base_url": fake.openai_url},
            tools=web(chunk_tokens=1_000, summarize_concurrency=4),
            limits={"max_concurrent_llm_calls": 1},
            agents={"helper": {}},
            routes=[{"agent": "helper", "chat": "helper-chat"}],
        )
        async with run_gateway(settings) as (gateway, channel):
            await channel.push("read " + url, chat_id="main-chat")
            await channel.push("read " + url + " too", chat_id="helper-chat")
            await asyncio.wait_for(channel.wait_for(2), 60)
            await gateway.wait_idle()
        assert sum(is_page_part(r) for r in fake.requests) == 16  # both agents condensed
        assert fake.max_in_flight == 1
    finally:
        await fake.stop()


async def test_a_background_reflection_never_keeps_the_next_message_waiting(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    """One slot at the model server (a local llama.cpp): the reflection after a long
    message holds it when the person writes again. Their turn does not queue behind it:
    the reflection gives the slot up, and is asked again once the turn is done."""
    stuck = asyncio.Event()  # the first reflection call never finishes by itself
    reflections: list[Recorded] = []

    def respond(request: Recorded) -> Step:
        if "worth remembering" in request.last_user_text:
            if request.tool_results:
                return text("DONE")
            reflections.append(request)
            if len(reflections) == 1:
                return Step(text="DONE", gate=stuck)
            return calls(("memory_append", {"content": "Trip: Lisbon in May", "to": "memory"}))
        return text(f"echo: {request.last_user_text[:24]}")

    fake_llm.responder = respond
    async with run_gateway(agent={"reflection": True}, limits={"max_concurrent_llm_calls": 1}) as (
        gateway,
        channel,
    ):
        await channel.push("We are going to Lisbon in May, by train. " * 8)
        await channel.wait_for(1)
        await fake_llm.wait_for_requests(2)  # the reflection is at the server, held there
        await channel.push("And we won't rent a car.")
        replies = await asyncio.wait_for(channel.wait_for(2), 5)  # the slot is not held
        await asyncio.wait_for(gateway.agent.settle(), 10)
        memory = (gateway.settings.workspace_dir / "MEMORY.md").read_text()
        stuck.set()
    assert replies[-1].text == "echo: And we won't rent a car."
    assert len(reflections) == 2  # cut for the person's turn, then asked again
    assert "Trip: Lisbon in May" in memory  # nothing the reflection would keep is lost
