"""Money caps (issue 51, threat T37): a member's turns stop at their cap with when it resets;
a call whose estimate would pass a cap is not made; the owner is told at 50, 80 and 100 %
once each; background work pauses at the gateway's cap while the owner's own turns go on;
caps and notices hold across a restart and for every node on one database."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from channels.memory import MemoryChannel
from gateway.config.agents import AgentProfile
from gateway.config.settings import LimitSettings
from gateway.core.addressing import agent_of
from gateway.core.messages import ChatRef, OutboundKind
from gateway.core.principal import Principal, Role
from gateway.core.usage import usd
from gateway.runtime.app import Gateway
from gateway.runtime.people.spend import SpendCaps
from gateway.runtime.people.spend_notices import SpendWatch
from gateway.runtime.turns.accounting import channel_of
from gateway.store import HomeChat, Spender, UsageRecord
from gateway.web.status import snapshot
from tests.backends import StoreFactory
from tests.conftest import SettingsFactory
from tests.fakes.clock import FakeClock
from tests.fakes.llm import FakeLLM, Recorded, Step, calls, held, text

ACCESS = {"dm_policy": "allowlist", "allow_from": ["alice", "bob"], "owners": ["olga"]}
# The fake model counts 4 characters a token: each of these answers is 100 output tokens,
# $0.10 at $1,000 per million (input free); asking for at most 100 tokens, a call's
# estimate is $0.10 too.
ANSWER = "A long and careful answer. " * 14 + "All done, that is all."
OUTPUT_ONLY = {"max_tokens": 100, "prices": {"fake-model": {"input": 0, "output": 1000}}}
ESSAY = "".join(f"Paragraph {n} goes on and on about the matter at hand. " for n in range(200))
RESETS = re.compile(r"It resets in \d+ (h|min)[^(]*\(at 00:00 UTC\)\.")


def answers(_: Recorded) -> Step:
    return text(ANSWER)


async def ask(channel: MemoryChannel, gateway: Gateway, words: str, sender: str) -> None:
    await channel.push(words, sender_id=sender, chat_id=sender, message_id=f"{sender}:{words}")
    await gateway.wait_idle()


def notices(channel: MemoryChannel, chat: str) -> list[str]:
    return [
        m.text
        for m in channel.sent
        if m.chat_id == chat and m.kind is OutboundKind.NOTICE and m.text.startswith("Spending")
    ]


async def test_a_members_turns_stop_at_their_daily_cap_saying_when_it_resets(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    assert len(ANSWER) // 4 == 100
    fake_llm.responder = answers
    channel = MemoryChannel("telegram")
    limits = {"person_daily_usd": 0.20}
    async with run_gateway(channel=channel, telegram=ACCESS, limits=limits, llm=OUTPUT_ONLY) as (
        gateway,
        _,
    ):
        for number in range(3):
            await ask(channel, gateway, f"question {number}", "alice")
        await ask(channel, gateway, "and me?", "bob")
        await ask(channel, gateway, "/usage", "alice")
        [spent] = await gateway.store.usage.spending([Spender("person", "telegram:alice")], since=0)
    alice = channel.texts("alice")
    assert alice[:2] == [ANSWER, ANSWER]
    assert alice[2].startswith("You've used today's allowance of my time ($0.20).")
    assert RESETS.search(alice[2]), alice[2]
    assert channel.texts("bob") == [ANSWER]  # a cap of her own
    assert len(fake_llm.requests) == 3  # her third turn made no call
    assert abs(spent - 0.20) < 1e-9  # the cost of each call was stored with its usage
    usage = alice[3].splitlines()
    assert usage[1].startswith("- today: 200 tokens") or "$0.2000" in usage[1]
    assert any(
        line.startswith("- You today (cap $0.20): $0.20 spent, $0.00 left") for line in usage
    )


async def test_the_owner_is_told_of_each_member_that_reaches_their_cap(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = answers
    channel = MemoryChannel("telegram")
    limits = {"person_daily_usd": 0.10}
    async with run_gateway(channel=channel, telegram=ACCESS, limits=limits, llm=OUTPUT_ONLY) as (
        gateway,
        _,
    ):
        await ask(channel, gateway, "hello", "olga")  # the owner's home chat
        await ask(channel, gateway, "question", "alice")
        await ask(channel, gateway, "question", "bob")
    told = notices(channel, "olga")
    assert len(told) == 2  # bob's was news too, not the day's one notice of the cap
    assert "telegram:alice has used today's allowance" in told[0]
    assert "telegram:bob has used today's allowance" in told[1]


async def test_usage_shows_each_person_the_caps_that_hold_them(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    """A member's /usage names the gateway's cap that refuses them; the owner's names the
    cap each member has (it said "no caps set"); amounts under a cent are not rounded away."""
    fake_llm.responder = answers
    channel = MemoryChannel("telegram")
    limits = {"person_daily_usd": 0.5, "gateway_daily_usd": 0.15}
    async with run_gateway(channel=channel, telegram=ACCESS, limits=limits, llm=OUTPUT_ONLY) as (
        gateway,
        _,
    ):
        await ask(channel, gateway, "hello", "olga")  # $0.10 of the gateway's $0.15
        await ask(channel, gateway, "/usage", "alice")
        await ask(channel, gateway, "/usage", "olga")
    alice, olga = channel.texts("alice")[-1], channel.texts("olga")[-1]
    assert "- Everyone today (cap $0.15): $0.10 spent, $0.05 left" in alice
    assert "- You today (cap $0.50): $0.00 spent, $0.50 left" in alice
    assert "- Each member today: cap $0.50 (limits.person_daily_usd)" in olga
    assert "no caps set" not in olga


async def test_a_calls_estimate_is_at_the_dearest_model_that_may_answer_it(
    make_settings: SettingsFactory, fake_llm: FakeLLM, backup_llm: FakeLLM
) -> None:
    """The main model would cost $0.10, its fallback $0.30: a member with $0.20 a day is
    refused before the call (the fallback answered, and the cap was passed by half)."""
    fallback = {
        "provider": "openai",
        "model": "backup-model",
        "base_url": backup_llm.openai_url,
        "api_key": "sk-backup-key-654321",
    }
    prices = {
        "fake-model": {"input": 0, "output": 1000},
        "backup-model": {"input": 0, "output": 3000},
    }
    settings = make_settings(
        telegram=ACCESS,
        limits={"person_daily_usd": 0.20},
        llm={"max_tokens": 100, "prices": prices, "fallbacks": [fallback]},
    )
    fake_llm.responder = answers
    channel = MemoryChannel("telegram")
    async with Gateway(settings, channels=[channel]) as gateway:
        await ask(channel, gateway, "question", "alice")
    [told] = channel.texts("alice")
    assert told.startswith(
        "I stopped before asking the model: your daily allowance of $0.20 is too small for "
        "one answer here. This request would cost up to about $0.30 "
    )
    assert fake_llm.requests == [] and backup_llm.requests == []


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_cap_smaller_than_one_calls_estimate_gets_the_answer_it_pays_for(
    run_gateway: Any, fake_llm: FakeLLM, provider: str
) -> None:
    """4,096 answer tokens at $1,000 a million would cost up to $4.10, more than a member's
    whole $0.30 a day: the call asks for the 300 tokens $0.30 pays, the model stops there,
    and the day's spending is the cap, not more."""
    fake_llm.keeps_to_max_tokens = True
    fake_llm.responder = lambda _: text(ESSAY)
    channel = MemoryChannel("telegram")
    llm = {**OUTPUT_ONLY, "provider": provider, "max_tokens": 4_096}
    async with run_gateway(
        channel=channel, telegram=ACCESS, limits={"person_daily_usd": 0.30}, llm=llm
    ) as (gateway, _):
        await ask(channel, gateway, "tell me everything", "alice")
        await ask(channel, gateway, "and then?", "alice")
        [spent] = await gateway.store.usage.spending([Spender("person", "telegram:alice")], since=0)
    answer, refused = channel.texts("alice")
    assert answer == ESSAY[: 300 * 4].strip()  # what 300 tokens pay of it
    assert [r.body["max_tokens"] for r in fake_llm.requests] == [300]
    assert abs(spent - 0.30) < 1e-9
    assert refused.startswith("You've used today's allowance of my time ($0.30).")


async def test_a_cap_that_pays_no_useful_answer_says_whether_waiting_helps(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    """Below 256 answer tokens no call is made: ann's own $0.20 a day never pays one, so she
    is told her cap is too small and which setting it is (not to wait for a reset that
    would not help); bob, whose $0.30 does, is told what is left and when it resets."""
    fake_llm.responder = answers
    channel = MemoryChannel("telegram")
    people = {"ann": {"ids": ["telegram:alice"], "daily_usd": 0.20}}
    llm = {**OUTPUT_ONLY, "max_tokens": 4_096}
    async with run_gateway(
        channel=channel,
        telegram=ACCESS,
        people=people,
        limits={"person_daily_usd": 0.30},
        llm=llm,
    ) as (gateway, _):
        await ask(channel, gateway, "hello", "alice")
        await ask(channel, gateway, "a question", "bob")  # $0.10 of his $0.30
        await ask(channel, gateway, "another", "bob")
    [too_small] = channel.texts("alice")
    assert too_small.startswith(
        "I stopped before asking the model: your daily allowance of $0.20 is too small for "
        "one answer here. This request would cost up to about $0.2560 even with a short "
        "answer (256 tokens)."
    )
    assert too_small.endswith("the cap is the setting people.ann.daily_usd.")
    assert "resets" not in too_small
    answered, left = channel.texts("bob")
    assert answered == ANSWER
    assert left.startswith(
        "I stopped before asking the model: this request would cost up to about $0.2560 "
        "and your daily allowance of $0.30 has $0.20 left."
    )
    assert RESETS.search(left), left
    assert [r.body["max_tokens"] for r in fake_llm.requests] == [300]


def test_money_under_a_cent_is_not_rounded_away() -> None:
    assert usd(0.0147) == "$0.0147" and usd(0.01) == "$0.01" and usd(0.1972) == "$0.1972"
    assert usd(0.2) == "$0.20" and usd(1234.5678) == "$1,234.57"


async def test_a_prompt_estimated_to_pass_the_cap_is_refused_before_the_call(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    channel = MemoryChannel("telegram")
    limits = {"person_daily_usd": 0.06}
    # $10 per million input tokens: the first prompt (about 2,000 tokens) costs about $0.02,
    # a pasted text of 40,000 characters (10,000 tokens) about $0.10 more
    llm = {"prices": {"fake-model": {"input": 10, "output": 0}}}
    async with run_gateway(channel=channel, telegram=ACCESS, limits=limits, llm=llm) as (
        gateway,
        _,
    ):
        await ask(channel, gateway, "a short question", "alice")
        await ask(channel, gateway, "summarise this: " + "lorem ipsum dolor " * 2_200, "alice")
        await ask(channel, gateway, "another short one", "alice")
    first, refused, third = channel.texts("alice")
    assert first == "echo: a short question"
    # the cap's whole day would not pay it: told so, not to wait for the reset
    assert refused.startswith(
        "I stopped before asking the model: your daily allowance of $0.06 is too small for "
        "one answer here. This request would cost up to about $0.1"
    )
    assert "A shorter message, or /new for a fresh conversation, costs less" in refused
    assert third == "echo: another short one"  # the cap was not spent by the refused call
    assert len(fake_llm.requests) == 2


async def test_the_owner_is_told_once_at_50_80_and_100_percent_and_background_work_pauses(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = answers
    clock = FakeClock(datetime.now(UTC).replace(microsecond=0))
    channel = MemoryChannel("telegram")
    limits = {"gateway_daily_usd": 0.35}  # 100 output tokens at $1,000/M: $0.10 a turn
    heartbeat = {"interval_seconds": 600}
    async with run_gateway(
        channel=channel,
        clock=clock,
        telegram=ACCESS,
        limits=limits,
        llm=OUTPUT_ONLY,
        heartbeat=heartbeat,
    ) as (gateway, _):
        (gateway.settings.workspace_dir / "HEARTBEAT.md").write_text("- Check the plants.\n")
        for number in range(4):  # 29 %, 57 %, 86 %, 114 %
            await ask(channel, gateway, f"owner question {number}", "olga")
        told = notices(channel, "olga")
        assert len(told) == 3, told
        calls_before = len(fake_llm.requests)
        await ask(channel, gateway, "a member's question", "alice")
        await clock.advance(seconds=601)  # a heartbeat tick: skipped at the cap
        await gateway.wait_idle()
        assert len(fake_llm.requests) == calls_before  # neither the member nor the heartbeat
        await ask(channel, gateway, "the owner goes on", "olga")
        await gateway.wait_idle()
        status = (await snapshot(gateway))["usage"]  # what the control center charts
    assert told[0].startswith("Spending: 50 % used. Today's spending is $0.20 of $0.35")
    assert told[1].startswith("Spending: 80 % used. Today's spending is $0.30 of $0.35")
    assert told[2].startswith("Spending limit reached. Today's spending is $0.40 of $0.35")
    assert "members' turns and background work are refused; your own turns go on" in told[2]
    assert notices(channel, "olga") == told  # nothing more after the cap, whatever ran
    [refused] = channel.texts("alice")
    assert refused.startswith("I've used today's spending limit, so I can't take on more")
    assert RESETS.search(refused)
    assert len(fake_llm.requests) == calls_before + 1  # the owner's own turn
    assert channel.texts("olga")[-1] == ANSWER
    [cap] = status["caps"]
    assert (cap["key"], cap["limit"], round(cap["spent"], 6)) == (
        "limits.gateway_daily_usd",
        0.35,
        0.5,
    )
    assert [(r["key"], round(r["cost"], 6)) for r in status["by_person"]] == [
        ("telegram:olga", 0.5)
    ]
    assert [(r["key"], round(r["cost"], 6)) for r in status["by_agent"]] == [("main", 0.5)]


async def test_caps_and_notices_survive_a_restart(
    run_gateway: Any, make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = answers
    settings = make_settings(telegram=ACCESS, limits={"gateway_daily_usd": 0.15}, llm=OUTPUT_ONLY)
    first = MemoryChannel("telegram")
    async with run_gateway(settings, channel=first) as (gateway, _):
        await ask(first, gateway, "one", "olga")  # 67 %
        await ask(first, gateway, "two", "olga")  # 133 %: 80 and 100 told in one message
        await gateway.wait_idle()
    half, full = notices(first, "olga")
    assert half.startswith("Spending: 50 %") and full.startswith("Spending limit reached.")
    second = MemoryChannel("telegram")
    async with run_gateway(settings, channel=second) as (gateway, _):
        await ask(second, gateway, "three", "olga")  # more spending: nothing new to tell
        await ask(second, gateway, "me too", "alice")
        await gateway.wait_idle()
    assert notices(second, "olga") == []
    assert second.texts("alice")[0].startswith("I've used today's spending limit")


async def test_a_notice_from_before_the_owner_had_a_home_chat_is_sent_once_they_have_one(
    run_gateway: Any, make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """A member reached her cap before the owner ever wrote to the assistant, so there was
    no chat to tell the owner in: the notice is kept (across a restart) and comes with the
    owner's first answer, once."""
    fake_llm.responder = answers
    settings = make_settings(telegram=ACCESS, limits={"person_daily_usd": 0.10}, llm=OUTPUT_ONLY)
    first = MemoryChannel("telegram")
    async with run_gateway(settings, channel=first) as (gateway, _):
        await ask(first, gateway, "question", "alice")  # $0.10: her cap reached
        await ask(first, gateway, "another", "alice")
    assert first.texts("alice")[1].startswith("You've used today's allowance of my time")
    second = MemoryChannel("telegram")
    async with run_gateway(settings, channel=second) as (gateway, _):
        await ask(second, gateway, "hello", "olga")  # her chat becomes the home
        await second.wait_for(2, chat_id="olga")
        await ask(second, gateway, "and again", "olga")
        await gateway.wait_idle()
    [told] = notices(second, "olga")
    assert told.startswith(
        "Spending limit reached. telegram:alice has used today's allowance ($0.10 of $0.10, "
        "limits.person_daily_usd): their turns are refused until it resets in"
    )
    assert second.texts("olga") == [ANSWER, told, ANSWER]


async def test_a_kept_notice_is_sent_once_and_not_after_its_day_is_over(
    make_store: StoreFactory,
) -> None:
    """On both engines: a notice the owner could not be told is kept in the store; once
    there is a home chat it is queued once (also when another process looks too), saying
    when the cap resets from then on; one whose day ended meanwhile is dropped."""
    now = datetime(2026, 11, 27, 9, 0, tzinfo=UTC).timestamp()  # 10:00 in Berlin
    clock = [now]
    home: list[HomeChat | None] = [None]
    woken: list[str] = []  # the channels whose outbox worker was told of a new message
    alice = Principal("telegram", "alice")

    async def owners_home() -> HomeChat | None:
        return home[0]

    async with make_store() as store:
        caps = SpendCaps(
            store.usage,
            LimitSettings(person_daily_usd=0.10),
            people={},
            agents={},
            timezone="Europe/Berlin",
            clock=lambda: clock[0],
        )

        def node() -> SpendWatch:
            return SpendWatch(
                caps, store.spend_notices, home=owners_home, outbound_ready=woken.append
            )

        watch = node()

        async def spend() -> None:
            at = clock[0]
            record = UsageRecord("telegram", "m", 1, 1, at=at, principal=alice.person, cost_usd=0.1)
            await store.usage.record(f"turn-{at}", alice.person, record)
            await watch.committed(alice, alice.person, [record])

        async def home_known() -> list[str]:
            home[0] = HomeChat(ChatRef("telegram", "olga"))
            for process in (watch, node()):  # this one, and another node or a restart
                await process.committed(None, "telegram:olga", [], home_changed=True)
            return [r.message.text for r in await store.outbox.heads("telegram")]

        await spend()  # her cap reached with no home chat to tell the owner in
        clock[0] += 2 * 3_600
        [told] = await home_known()
        home[0] = None
        clock[0] += 86_400  # the next day: reached again, kept again
        await spend()
        clock[0] += 86_400  # and that day is over before the owner has a home chat
        assert await home_known() == [told]
        assert await store.spend_notices.waiting() == []
    assert woken == ["telegram"]
    assert told == (
        "Spending limit reached. telegram:alice has used today's allowance ($0.10 of $0.10, "
        "limits.person_daily_usd): their turns are refused until it resets in 12 h "
        "(at 00:00 Europe/Berlin)."
    )


@pytest.mark.slow
async def test_nodes_on_one_database_share_the_caps_and_tell_each_level_once(
    tmp_path: Path, make_settings: SettingsFactory, fake_llm: FakeLLM, pg_url: str
) -> None:
    fake_llm.responder = answers

    def node(name: str) -> Any:
        return make_settings(
            home=tmp_path / name,
            storage={"url": pg_url},
            node={"name": name},
            telegram=ACCESS,
            limits={"gateway_daily_usd": 0.15},
            llm=OUTPUT_ONLY,
        )

    channel = MemoryChannel("telegram")
    alice = Principal("telegram", "alice")
    olga = Principal("telegram", "olga", role=Role.OWNER)
    async with Gateway(node("a"), channels=[channel]) as a:
        await channel.push("one", sender_id="olga", chat_id="olga")
        await channel.wait_for(2, chat_id="olga")  # the answer and the notice at 50 %
        await channel.push("two", sender_id="olga", chat_id="olga")
        await channel.wait_for(4, chat_id="olga")  # the answer and the notice at 100 %
        await a.wait_idle()
        b = Gateway(node("b"), channels=[MemoryChannel("telegram")])
        joining = asyncio.create_task(b.start())  # a standby while a leads
        try:
            await asyncio.wait_for(b.guard.standby.wait(), 10)
            refusal = await b.parts.budget.check(alice)
            # b sees what a spent, and finds every level told already
            await b.parts.spend.spent(olga, agent="main", background=False)
            told = await b.store.spend_notices.told("limits.gateway_daily_usd", today(b))
        finally:
            joining.cancel()
            await asyncio.gather(joining, return_exceptions=True)
            await b.stop()
    assert refusal is not None and refusal.notice is not None
    assert refusal.notice.startswith("I've used today's spending limit")
    assert told == {50, 80, 100}
    assert len(notices(channel, "olga")) == 2


def today(gateway: Gateway) -> str:
    return datetime.now(gateway.parts.spend_caps.zone).strftime("%Y-%m-%d")


async def test_each_cap_counts_its_own_spending_and_a_month_adds_its_earlier_days(
    make_store: StoreFactory,
) -> None:
    # 2026-11-27 10:00 in Berlin: today began at 23:00 UTC the day before
    now = datetime(2026, 11, 27, 9, 0, tzinfo=UTC).timestamp()
    yesterday, today = now - 86_400, now - 3_600

    def row(at: float, session: str, person: str, cost: float | None) -> UsageRecord:
        channel, agent = channel_of(session), agent_of(session)
        return UsageRecord(channel, "m", 1, 1, at=at, principal=person, cost_usd=cost, agent=agent)

    rows = [
        row(yesterday, "telegram:alice", "telegram:alice", 1.0),
        row(today, "telegram:alice", "telegram:alice", 0.5),
        row(today, "work/telegram:bob", "telegram:bob", 2.0),
        row(today, "cron:job-1", "telegram:alice", 0.25),
        row(today, "heartbeat:main", "telegram:heartbeat", 0.125),
        row(today, "telegram:carol", "telegram:carol", None),  # a model without a price
        row(now - 40 * 86_400, "telegram:alice", "telegram:alice", 100.0),  # last month
    ]
    limits = LimitSettings(
        person_daily_usd=1.0,
        person_monthly_usd=10.0,
        gateway_daily_usd=5.0,
        background_daily_usd=1.0,
    )
    agents = {"work": AgentProfile(daily_usd=1.0)}
    async with make_store() as store:
        for number, record in enumerate(rows):
            await store.usage.record(f"turn-{number}", "s", record)
        caps = SpendCaps(
            store.usage,
            limits,
            people={},
            agents=agents,
            timezone="Europe/Berlin",
            clock=lambda: now,
        )
        alice = Principal("telegram", "alice")
        states = {
            s.cap.key: s
            for s in await caps.states(caps.turn_caps(alice, agent="work", background=True))
        }
        owner = caps.turn_caps(
            Principal("telegram", "olga", role=Role.OWNER), agent="main", background=False
        )
    assert round(states["limits.person_daily_usd"].spent_usd, 6) == 0.75  # her chat and her job
    assert round(states["limits.person_monthly_usd"].spent_usd, 6) == 1.75  # and yesterday
    assert round(states["limits.background_daily_usd"].spent_usd, 6) == 0.375
    assert round(states["agents.work.daily_usd"].spent_usd, 6) == 2.0
    assert states["agents.work.daily_usd"].reached
    assert round(states["limits.gateway_daily_usd"].spent_usd, 6) == 2.875
    day = states["limits.gateway_daily_usd"]
    assert (day.period_key, day.resets.isoformat()) == ("2026-11-27", "2026-11-28T00:00:00+01:00")
    assert caps.resets(day) == "in 14 h (at 00:00 Europe/Berlin)"
    assert states["limits.person_monthly_usd"].resets.isoformat() == "2026-12-01T00:00:00+01:00"
    assert owner == []  # the owner's own turns meet no cap of [limits]


async def test_a_day_is_the_owners_for_the_usage_chart_the_caps_and_the_heartbeat_budget(
    make_store: StoreFactory,
) -> None:
    """On both engines, whatever the zone of the machine or the database server: with the
    owner on Kiritimati (UTC+14) a call at 00:30 their time is today's, one an hour
    earlier yesterday's (both on the same day in UTC), for the chart of days, the daily cap
    and the heartbeat's daily tokens alike."""
    owners = ZoneInfo("Pacific/Kiritimati")
    now = datetime(2026, 11, 27, 12, 0, tzinfo=owners).timestamp()
    today = datetime(2026, 11, 27, 0, 30, tzinfo=owners).timestamp()
    yesterday = today - 3_600  # 23:30 on the 26th, their time
    assert (
        datetime.fromtimestamp(today, UTC).date() == datetime.fromtimestamp(yesterday, UTC).date()
    )

    def row(at: float, cost: float) -> UsageRecord:
        return UsageRecord("heartbeat", "m", 10, 5, at=at, principal="", cost_usd=cost)

    async with make_store(zone=owners, clock=lambda: now) as store:
        await store.usage.record("turn-1", "heartbeat:main", row(yesterday, 0.25))
        await store.usage.record("turn-2", "heartbeat:main", row(today, 0.5))
        days = await store.usage.since(2 * 86_400)
        heartbeat_today = await store.usage.tokens_today("heartbeat:")
        caps = SpendCaps(
            store.usage,
            LimitSettings(gateway_daily_usd=1.0),
            people={},
            agents={},
            timezone="Pacific/Kiritimati",
            clock=lambda: now,
        )
        [daily] = await caps.states(caps.gateway_caps())
    assert [(d.key, d.cost_usd) for d in days] == [("2026-11-26", 0.25), ("2026-11-27", 0.5)]
    assert heartbeat_today == 15
    assert (daily.period_key, daily.spent_usd) == ("2026-11-27", 0.5)


async def test_the_usage_footer_is_each_persons_own_choice(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = answers
    channel = MemoryChannel("telegram")
    async with run_gateway(channel=channel, telegram=ACCESS, llm=OUTPUT_ONLY) as (gateway, _):
        await ask(channel, gateway, "/usage footer on", "alice")
        await ask(channel, gateway, "a question", "alice")
        await ask(channel, gateway, "a question too", "bob")
        await ask(channel, gateway, "/usage footer off", "alice")
        await ask(channel, gateway, "another question", "alice")
        await ask(channel, gateway, "/usage footer sideways", "alice")
    turned_on, footed, turned_off, plain, usage = channel.texts("alice")
    assert turned_on.startswith("From now on I add the tokens and cost of each answer")
    answer, footer = footed.split("\n\n")
    assert answer == ANSWER
    assert re.fullmatch(r"— [\d,]+ tokens in, 100 out · \$0\.1000", footer), footer
    assert channel.texts("bob") == [ANSWER]  # bob did not ask for it
    assert turned_off == "No more usage footer under my answers."
    assert plain == ANSWER
    assert (
        usage == "Usage: /usage footer on (tokens and cost under each answer) or /usage footer off."
    )


async def test_a_named_persons_own_cap_is_shown_under_the_key_config_gives_it(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = answers
    channel = MemoryChannel("telegram")
    people = {"ann": {"ids": ["telegram:alice"], "daily_usd": 0.15}}
    async with run_gateway(channel=channel, telegram=ACCESS, people=people, llm=OUTPUT_ONLY) as (
        gateway,
        _,
    ):
        await ask(channel, gateway, "a question", "alice")
        await ask(channel, gateway, "another", "alice")
        status = (await snapshot(gateway))["usage"]
    assert "your daily allowance of $0.15 has $0.05 left" in channel.texts("alice")[1]
    assert [(c["key"], c["limit"]) for c in status["caps"]] == [("people.ann.daily_usd", 0.15)]


async def test_a_call_cut_short_by_a_stop_is_still_counted(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    """The provider bills the prompt it read though a stop cut its answer short: the turn's
    usage keeps an estimate of it, so the caps and /usage see what was spent."""
    gate = asyncio.Event()
    fake_llm.queue(held(gate, "the essay nobody reads"))
    channel = MemoryChannel("telegram")
    llm = {"prices": {"fake-model": {"input": 1000, "output": 0}}}  # $0.001 a prompt token
    async with run_gateway(channel=channel, telegram=ACCESS, llm=llm) as (gateway, _):
        await channel.push("write me a long essay", sender_id="alice", chat_id="alice")
        await fake_llm.wait_for_requests(1)
        await channel.push("/stop", sender_id="alice", chat_id="alice")
        [stopped] = await channel.wait_for(1)
        gate.set()
        await gateway.wait_idle()
        [spent] = await gateway.store.usage.spending([Spender("person", "telegram:alice")], since=0)
    assert stopped.text.startswith("Stopped.")
    # the prompt (its system prompt and tools: well over 500 tokens) cost more than $0.50
    assert spent > 0.5


async def test_what_a_turn_spent_before_a_restart_counts_once_it_runs_again(
    run_gateway: Any, make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """A turn that runs tools stores what each call cost as it goes: a gateway stopped (or
    killed) in the middle of the turn has not lost it from the caps, and the turn's run
    after the restart adds its own calls to it instead of replacing them."""
    gate = asyncio.Event()
    fake_llm.queue(calls(("list_files", {"path": "."})), held(gate, "never seen"))
    channel = MemoryChannel("telegram")
    llm = {"prices": {"fake-model": {"input": 1000, "output": 0}}}  # $0.001 a prompt token
    settings = make_settings(telegram=ACCESS, llm=llm)
    alice = [Spender("person", "telegram:alice")]
    async with run_gateway(settings, channel=channel) as (gateway, _):
        await channel.push("what is in my folder?", sender_id="alice", chat_id="alice")
        await fake_llm.wait_for_requests(2)  # the tool ran; the model is asked again
        [before] = await gateway.store.usage.spending(alice, since=0)
        await gateway.stop(drain_timeout=0)  # stopped (or killed) mid-turn
    gate.set()
    assert before > 0.5  # the first call's prompt, with its system prompt and tools

    fake_llm.queue(text("Two files."))
    channel = MemoryChannel("telegram")
    async with run_gateway(settings, channel=channel) as (gateway, _):
        [answer] = await channel.wait_for(1)
        await gateway.wait_idle()
        [after] = await gateway.store.usage.spending(alice, since=0)
        [person] = await gateway.store.usage.since(3600, by="person")
    assert answer.text == "Two files."
    # the first run's call, and the second run's: its own prompt again, and more
    assert after > 2 * before
    assert person.turns == 1
