"""Per-person allowances (T37): one allowed user cannot run up the owner's bill, and hitting
the limit is told once, never with a model call; the owner and other people are unaffected."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from channels.memory import MemoryChannel
from tests.fakes.clock import FakeClock
from tests.fakes.llm import FakeLLM, calls, text

ACCESS = {"dm_policy": "allowlist", "allow_from": ["alice", "bob"], "owners": ["olga"]}


async def ask(channel: MemoryChannel, gateway: Any, text: str, sender: str) -> None:
    await channel.push(text, sender_id=sender, chat_id=sender)
    await gateway.wait_idle()


async def test_a_flood_of_turns_gets_one_notice_and_no_model_calls(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    channel = MemoryChannel("telegram")
    limits = {"user_turns_per_hour": 2}
    async with run_gateway(channel=channel, telegram=ACCESS, limits=limits) as (gateway, _):
        for number in range(5):
            await ask(channel, gateway, f"question {number}", "alice")
        await ask(channel, gateway, "and me?", "bob")
        for number in range(3):
            await ask(channel, gateway, f"owner {number}", "olga")
        audit = await gateway.store.audit.recent()
    alice = channel.texts("alice")
    assert alice[:2] == ["echo: question 0", "echo: question 1"]
    assert len(alice) == 3 and "more requests than I can take on" in alice[2]  # told once
    assert channel.texts("bob") == ["echo: and me?"]
    assert channel.texts("olga") == [f"echo: owner {n}" for n in range(3)]  # never limited
    assert len(fake_llm.requests) == 2 + 1 + 3
    refused = [e for e in audit if e.kind == "budget"]
    assert len(refused) == 3 and {e.sender_id for e in refused} == {"alice"}


async def test_spent_tokens_stop_the_next_turn_until_the_window_passes(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    channel = MemoryChannel("telegram")
    limits = {"user_daily_tokens": 1}  # any real turn uses it up
    async with run_gateway(channel=channel, telegram=ACCESS, limits=limits) as (gateway, _):
        await ask(channel, gateway, "first", "alice")
        await ask(channel, gateway, "second", "alice")
        await ask(channel, gateway, "hello", "bob")
    assert channel.texts("alice")[0] == "echo: first"
    assert "today's allowance" in channel.texts("alice")[1]
    assert channel.texts("bob") == ["echo: hello"]
    assert len(fake_llm.requests) == 2


async def test_limits_of_zero_switch_the_allowance_off(run_gateway: Any, fake_llm: FakeLLM) -> None:
    channel = MemoryChannel("telegram")
    limits = {"user_turns_per_hour": 0, "user_daily_tokens": 0}
    async with run_gateway(channel=channel, telegram=ACCESS, limits=limits) as (gateway, _):
        for number in range(4):
            await ask(channel, gateway, f"q{number}", "alice")
    assert channel.texts("alice") == [f"echo: q{n}" for n in range(4)]


async def test_a_scheduled_job_draws_on_its_owners_allowance(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    clock = FakeClock(datetime(2026, 11, 23, 10, 0, tzinfo=UTC))
    channel = MemoryChannel("telegram")
    access = {**ACCESS, "admins": ["alice"]}  # an admin may schedule jobs
    limits = {"user_daily_tokens": 1}  # her first turn uses it up
    job = {"action": "add", "schedule": "every 2 hours", "prompt": "Give me a fun fact."}
    fake_llm.queue(calls(("cron", job)), text("Scheduled: a fun fact every 2 hours."))
    async with run_gateway(channel=channel, clock=clock, telegram=access, limits=limits) as (
        gateway,
        _,
    ):
        await ask(channel, gateway, "a fun fact every 2 hours", "alice")
        await clock.advance(hours=2, seconds=1)
        await channel.wait_for(2, chat_id="alice")
        await gateway.wait_idle()
        audit = await gateway.store.audit.recent()
        [active] = await gateway.store.jobs.active()
    assert len(fake_llm.requests) == 2  # the chat turn's two calls; the job's runs made none
    assert channel.texts("alice") == [
        "Scheduled: a fun fact every 2 hours.",
        "A scheduled job was skipped. You've used today's allowance of my time. "
        "Please try again later (it refills over 24 hours).",
    ]
    assert [e.sender_id for e in audit if e.kind == "budget"] == ["alice"]
    assert active.runs == 1  # a skipped run counts as run: it is not retried in a loop
