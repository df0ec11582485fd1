"""Each person's own time: a member sets their zone by asking, and "remind me tomorrow at 9"
arrives at 9:00 where they are, not where the owner is. On a clock the test moves by hand.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from channels.memory import MemoryChannel
from gateway.config.settings import Settings
from gateway.runtime.app import Gateway
from gateway.runtime.cluster.work import ClusterWork
from tests.conftest import SettingsFactory
from tests.fakes.clock import FakeClock
from tests.fakes.llm import FakeLLM, calls, text
from tests.fakes.telegram import FakeTelegram, fast_channel, section

START = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)  # a Monday; 05:00 in New York
MEMBER = 42  # on the allowlist, not an owner or admin
NEW_YORK = "America/New_York"


async def test_a_members_reminder_fires_at_nine_in_their_own_zone(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    clock = FakeClock(START)
    settings = make_settings(telegram=section(tg), user={"timezone": "Europe/Berlin"})
    set_zone = ("timezone", {"action": "set", "zone": NEW_YORK})
    fake_llm.queue(
        calls(set_zone),
        text("Shall I use America/New_York as your time zone? It is 05:00 there now."),
        calls(set_zone),
        text("Done: New York time from now on."),
        calls(("cron", {"action": "add", "schedule": "tomorrow at 9:00", "message": "Call mum!"})),
        text("I'll remind you tomorrow at 9:00."),
    )

    async def say(words: str, answers: int) -> None:
        await tg.say(words, user_id=MEMBER, chat_id=MEMBER)
        await tg.wait_sent(answers)
        await asyncio.wait_for(gateway.wait_idle(), 10)

    async with Gateway(settings, channels=[fast_channel(settings)], clock=clock) as gateway:
        await say("I'm in New York now", 1)
        zone_before = await gateway.store.people.zone(f"telegram:{MEMBER}")
        await say("yes", 2)
        await say("remind me tomorrow at 9 to call mum", 3)
        [job] = await gateway.store.jobs.active()
        await clock.advance(hours=27, minutes=59)  # Tuesday 13:59 UTC: 08:59 in New York
        await asyncio.wait_for(gateway.wait_idle(), 10)
        assert len(tg.sent(MEMBER)) == 3
        await clock.advance(minutes=1, seconds=1)  # 09:00 in New York
        await tg.wait_sent(4)
        await asyncio.wait_for(gateway.wait_idle(), 10)
    first, asked, _, confirmed, remind, _ = fake_llm.requests
    assert zone_before is None  # nothing stored before they said yes
    assert "not set yet. Ask them to confirm" in str(asked.body)
    assert "time zone set to America/New_York" in str(confirmed.body)
    assert job.next_run == datetime(2026, 11, 24, 14, 0, tzinfo=UTC)
    assert tg.texts(MEMBER)[-1] == "Call mum!"
    # Their turns run on their clock: the day and zone in the prompt are New York's.
    assert "Today: 2026-11-23 (Monday), time zone EST" in remind.system_text
    assert "time zone CET" in first.system_text  # before: the gateway's user.timezone


async def test_a_zone_in_config_wins_and_members_jobs_are_capped(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    clock = FakeClock(START)
    settings = make_settings(
        telegram=section(tg),
        people={f"telegram:{MEMBER}": {"timezone": "Asia/Tokyo"}},
        scheduler={"max_jobs_per_member": 1},
    )
    add = ("cron", {"action": "add", "schedule": "every day at 9:00", "message": "Stretch"})
    fake_llm.queue(
        calls(("timezone", {"action": "set", "zone": NEW_YORK})),
        text("Your time zone is fixed by the owner."),
        calls(add),
        text("Done."),
        calls(add),
        text("You have too many jobs."),
    )
    async with Gateway(settings, channels=[fast_channel(settings)], clock=clock) as gateway:
        for count, words in enumerate(("I'm in New York", "remind me daily", "and again"), 1):
            await tg.say(words, user_id=MEMBER, chat_id=MEMBER)
            await tg.wait_sent(count)
            await asyncio.wait_for(gateway.wait_idle(), 10)
        jobs = await gateway.store.jobs.active()
    refused_zone = str(fake_llm.requests[1].body)
    assert "set by the owner in the configuration (Asia/Tokyo)" in refused_zone
    assert [j.next_run for j in jobs] == [datetime(2026, 11, 24, 0, 0, tzinfo=UTC)]  # 9:00 JST
    assert "at most 1" in str(fake_llm.requests[5].body)


def test_the_default_zone_is_utc_and_a_person_is_named_by_channel_and_id(tmp_path: Any) -> None:
    assert Settings(home=tmp_path).timezone == "UTC"
    with pytest.raises(ValueError, match=r"people\.telegram"):
        Settings(home=tmp_path, people={"telegram": {"timezone": "UTC"}})


async def test_a_job_due_in_the_persons_quiet_hours_waits_until_they_end(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    clock = FakeClock(START)  # 19:00 in Tokyo
    settings = make_settings(
        telegram=section(tg),
        people={f"telegram:{MEMBER}": {"timezone": "Asia/Tokyo", "quiet_hours": "22:00-07:00"}},
    )
    fake_llm.queue(
        calls(("cron", {"action": "add", "schedule": "at 23:00", "message": "Water the plants"})),
        text("I'll remind you at 23:00."),
    )
    async with Gateway(settings, channels=[fast_channel(settings)], clock=clock) as gateway:
        await tg.say("remind me at 11pm to water the plants", user_id=MEMBER, chat_id=MEMBER)
        await tg.wait_sent(1)
        await asyncio.wait_for(gateway.wait_idle(), 10)
        await clock.advance(hours=4, seconds=1)  # 23:00 in Tokyo: inside their quiet hours
        await asyncio.wait_for(gateway.wait_idle(), 10)
        during = tg.texts(MEMBER)
        [waiting] = await gateway.store.jobs.active()
        await clock.advance(hours=8)  # 07:00 in Tokyo
        await tg.wait_sent(2)
        await asyncio.wait_for(gateway.wait_idle(), 10)
    assert during == ["I'll remind you at 23:00."]
    assert waiting.next_run == datetime(2026, 11, 23, 22, 0, tzinfo=UTC)  # 07:00 JST
    assert tg.texts(MEMBER)[-1] == "Water the plants"


@pytest.mark.slow
async def test_a_zone_set_on_one_node_is_the_zone_of_the_persons_turns_on_every_node(
    tmp_path: Path, make_settings: SettingsFactory, pg_url: str
) -> None:
    """Node b read the person's zone (none set: the gateway's) and keeps it; once they
    confirm Tokyo through node a, b's next turn for them runs on Tokyo time."""

    def node(name: str) -> Settings:
        return make_settings(home=tmp_path / name, storage={"url": pg_url}, node={"name": name})

    person = "memory:user-1"
    async with Gateway(node("a"), channels=[MemoryChannel()]) as a:
        b = Gateway(node("b"), channels=[MemoryChannel()])
        joining = asyncio.create_task(b.start())  # b runs turns while a leads
        try:
            await asyncio.wait_for(b.guard.standby.wait(), 10)
            work = b.parts.intake
            assert isinstance(work, ClusterWork)
            await asyncio.wait_for(work.listener.connected.wait(), 10)
            before = await b.parts.zones.clock_zone(person)
            assert before.key != "Asia/Tokyo"
            await a.parts.zones.propose_zone(person, "Asia/Tokyo", "turn-1")
            assert await a.parts.zones.confirm_zone(person, "Asia/Tokyo", "turn-2")
            # b hears of it through PostgreSQL's NOTIFY
            await asyncio.wait_for(b.parts.zones.heard.wait(), 10)
            assert (await b.parts.zones.clock_zone(person)).key == "Asia/Tokyo"
        finally:
            joining.cancel()
            await asyncio.gather(joining, return_exceptions=True)
            await b.stop()
