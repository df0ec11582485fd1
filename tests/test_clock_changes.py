"""Scheduled jobs the night the clocks change: a time the autumn repeats runs once, one the
spring skips comes right after the jump, and a schedule whose next run does not move on never
fires on every round (docs/tools.md). The real Gateway and Scheduler on a clock the tests move."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from channels.memory import MemoryChannel
from gateway.core.messages import ChatRef
from gateway.core.schedule_spec import ScheduleSpec
from gateway.runtime.app import Gateway
from gateway.store import Job, Store
from tests.fakes.clock import FakeClock
from tests.fakes.llm import FakeLLM, calls, text
from tests.test_scheduler import BERLIN, START, idle

FALL_BACK = datetime(2027, 10, 31, 1, 10, tzinfo=UTC)  # 02:10 CET: Berlin's 02:00-03:00 again


async def test_a_daily_job_asked_for_in_the_repeated_hour_comes_once_a_day(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    """At 02:10 the second time that night, "every day at 2:30": that night's 02:30 came
    already (the first time round), so the first run is the next night's, and the model is
    told so; the job does not fire on every round meanwhile."""
    clock = FakeClock(FALL_BACK)
    fake_llm.queue(
        calls(("cron", {"action": "add", "schedule": "every day at 2:30", "message": "Pills"})),
        text("Set."),
    )
    async with run_gateway(clock=clock, user=BERLIN) as (gateway, channel):
        await channel.push("remind me every day at 2:30 to take my pills")
        await channel.wait_for(1)
        told = fake_llm.requests[-1].tool_results[-1]
        for _ in range(30):  # past 02:30 CET
            await clock.advance(minutes=1)
        await channel.push("still there?")  # a turn's worth of real time for any stray run
        await channel.wait_for(2)
        assert channel.texts() == ["Set.", "echo: still there?"]
        await clock.advance(days=1)
        await channel.wait_for(3)
        await idle(gateway)
    assert told.endswith("next run 2027-11-01 02:30 CET")
    assert channel.texts()[-1] == "Pills"


async def test_a_daily_job_missed_in_the_repeated_hour_runs_once_after_the_start(
    make_settings: Any, fake_llm: FakeLLM
) -> None:
    """02:30 CEST passed while the gateway was down; it starts at 02:10 CET: the job runs
    once, and next the following night (not at 02:30 CET, nor on every round)."""
    settings = make_settings(scheduler={"catchup_jitter_seconds": 0}, user=BERLIN)
    owner = {"channel": "memory", "sender_id": "user-1", "role": "owner"}
    due = datetime(2027, 10, 31, 0, 30, tzinfo=UTC)  # 02:30 CEST
    async with Store(settings.data_dir / "switchboard.db") as store:
        spec = ScheduleSpec("cron", "Europe/Berlin", cron="30 2 * * *")
        chat = ChatRef("memory", "user-1")
        await store.jobs.add(Job("night", spec, None, "Night task", chat, owner, next_run=due))
    clock = FakeClock(FALL_BACK)
    channel = MemoryChannel()
    async with Gateway(settings, channels=[channel], clock=clock) as gateway:
        await clock.advance(seconds=1)
        await channel.wait_for(1)
        for _ in range(30):  # past 02:30 CET
            await clock.advance(minutes=1)
        await channel.push("still there?")
        await channel.wait_for(2)
        await idle(gateway)
        job = await gateway.store.jobs.get("night")
    assert channel.texts() == ["Night task", "echo: still there?"]
    assert job is not None and job.next_run == datetime(2027, 11, 1, 1, 30, tzinfo=UTC)


async def test_a_job_whose_schedule_does_not_move_on_never_fires(
    make_settings: Any, fake_llm: FakeLLM
) -> None:
    """A stored schedule whose next run is not after now (a repeat of 0 seconds written by
    hand) would fire on every round: it does not fire at all."""
    settings = make_settings()
    owner = {"channel": "memory", "sender_id": "user-1", "role": "owner"}
    due = START + timedelta(minutes=5)
    async with Store(settings.data_dir / "switchboard.db") as store:
        spec = ScheduleSpec("interval", "UTC", every_seconds=0, start=due)
        chat = ChatRef("memory", "user-1")
        await store.jobs.add(Job("stuck", spec, None, "again", chat, owner, next_run=due))
    clock = FakeClock(START)
    channel = MemoryChannel()
    async with Gateway(settings, channels=[channel], clock=clock) as gateway:
        await clock.advance(minutes=5, seconds=1)
        await channel.push("hi")
        await channel.wait_for(1)
        await idle(gateway)
    assert channel.texts() == ["echo: hi"]


async def test_a_reminder_at_a_time_the_clocks_skip_comes_right_after_the_jump(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    """Berlin's clocks jump from 02:00 to 03:00 on 28 March 2027: "tomorrow at 2:30" comes
    at 03:00 CEST, as "every day at 2:30" does that night, and the model is told 03:00 (not
    "02:30 CET", a time that does not exist, which came at 03:30)."""
    clock = FakeClock(datetime(2027, 3, 27, 12, 0, tzinfo=UTC))
    fake_llm.queue(
        calls(("cron", {"action": "add", "schedule": "tomorrow at 2:30", "message": "Once"})),
        text("Set."),
        calls(("cron", {"action": "add", "schedule": "every day at 2:30", "message": "Daily"})),
        text("Set."),
    )
    async with run_gateway(clock=clock, user=BERLIN) as (gateway, channel):
        await channel.push("remind me tomorrow at 2:30")
        await channel.wait_for(1)
        once = fake_llm.requests[-1].tool_results[-1]
        await channel.push("and every day at 2:30")
        await channel.wait_for(2)
        daily = fake_llm.requests[-1].tool_results[-1]
        await clock.advance(hours=12, minutes=59)  # 02:59 CET
        await channel.push("anything yet?")
        await channel.wait_for(3)
        await clock.advance(minutes=1, seconds=1)  # 03:00:01 CEST
        await channel.wait_for(5)
        await idle(gateway)
    assert once.endswith("next run 2027-03-28 03:00 CEST")
    assert daily.endswith("next run 2027-03-28 03:00 CEST")
    assert channel.texts()[2:] == ["echo: anything yet?", "Once", "Daily"]
