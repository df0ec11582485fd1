"""On Slack, through slack-bolt against the fake: a mention shows it is being worked on
(👀, then ✅), and an edit of a message not answered yet replaces it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from channels.slack.adapter import SlackChannel
from gateway.config.settings import Settings
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory, edit_applied
from tests.fakes.llm import FakeLLM, held, streamed, text
from tests.fakes.slack import (
    APP_TOKEN,
    BOT_TOKEN,
    FakeSlack,
    block_actions,
    dm_event,
    edit_event,
    event_body,
    mention_event,
)


def settings_for(
    make_settings: SettingsFactory, fake_slack: FakeSlack, *, streaming: bool = False
) -> Settings:
    return make_settings(
        slack={
            "bot_token": BOT_TOKEN,
            "app_token": APP_TOKEN,
            "base_url": fake_slack.api_url,
            "allow_from": ["U42"],
            "group_allow_from": ["C0001"],
            "streaming": streaming,
        }
    )


@asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[Gateway]:
    async with Gateway(
        settings,
        channels=[SlackChannel(settings.slack, settings.channel_context(), ping_interval=1.0)],
    ) as gateway:
        yield gateway


async def test_a_mention_shows_it_is_worked_on_then_done(
    make_settings: SettingsFactory, fake_slack: FakeSlack, fake_llm: FakeLLM
) -> None:
    gate = asyncio.Event()
    fake_llm.queue(held(gate, "Here you go."))
    async with running(settings_for(make_settings, fake_slack)) as gateway:
        event = mention_event("summarise the thread", user="U42", ts="300.000001")
        await fake_slack.wait_ack(await fake_slack.push(event_body(event)))
        await fake_llm.wait_for_requests(1)
        working = list(fake_slack.reactions[("C0001", "300.000001")])
        gate.set()
        await fake_slack.wait_posts(1)
        await gateway.wait_idle()
    assert working == ["eyes"]  # while the model worked
    assert fake_slack.reactions[("C0001", "300.000001")] == ["white_check_mark"]


async def test_an_edit_before_the_answer_replaces_the_message(
    make_settings: SettingsFactory, fake_slack: FakeSlack, fake_llm: FakeLLM
) -> None:
    gate = asyncio.Event()
    fake_llm.queue(held(gate, "first answered"), text("second answered"))
    async with running(settings_for(make_settings, fake_slack)) as gateway:
        first = dm_event("first", user="U42", ts="400.000001")
        await fake_slack.wait_ack(await fake_slack.push(event_body(first)))
        await fake_llm.wait_for_requests(1)
        waiting = dm_event("book a table for two", user="U42", ts="400.000002")
        await fake_slack.wait_ack(await fake_slack.push(event_body(waiting)))
        edit = edit_event(waiting, "book a table for four", edited_ts="400.000003")
        await fake_slack.wait_ack(await fake_slack.push(event_body(edit)))
        await edit_applied(gateway, "slack", "D0001:400.000002")
        gate.set()
        await fake_slack.wait_posts(2)
        await gateway.wait_idle()
    assert fake_slack.texts() == ["first answered", "second answered"]
    assert "book a table for four" in fake_llm.requests[1].last_user_text
    assert "for two" not in str(fake_llm.requests[1].body)


async def test_the_stop_button_under_a_streamed_draft_stops_the_answer(
    make_settings: SettingsFactory, fake_slack: FakeSlack, fake_llm: FakeLLM
) -> None:
    words = " ".join(f"word{i}" for i in range(200))
    fake_llm.queue(streamed(words, chunks=100, over=20))
    async with running(settings_for(make_settings, fake_slack, streaming=True)) as gateway:
        event = dm_event("write me something long", user="U42", ts="500.000001")
        await fake_slack.wait_ack(await fake_slack.push(event_body(event)))
        [draft] = await fake_slack.wait_posts(1)
        payload = block_actions(draft, "/stop", user="U42")
        await fake_slack.wait_ack(await fake_slack.push_interactive(payload))
        await fake_slack.until(
            lambda: any(t.startswith("Stopped.") for t in fake_slack.visible("D0001"))
        )
        await gateway.wait_idle()
    kept, stopped = fake_slack.visible("D0001")
    # the draft keeps what it had written, marked, without its button; the notice follows
    assert draft.text == kept and draft.blocks == []
    assert kept.startswith("word0 word1 ") and kept.endswith("Stopped before it finished._")
    assert stopped.startswith("Stopped.")


async def test_a_slash_command_stops_the_running_turn(
    make_settings: SettingsFactory, fake_slack: FakeSlack, fake_llm: FakeLLM
) -> None:
    gate = asyncio.Event()
    fake_llm.queue(held(gate, "never delivered"))
    async with running(settings_for(make_settings, fake_slack)) as gateway:
        event = dm_event("think for a long time", user="U42", ts="600.000001")
        await fake_slack.wait_ack(await fake_slack.push(event_body(event)))
        await fake_llm.wait_for_requests(1)
        await fake_slack.wait_ack(
            await fake_slack.push_command("/stop", user="U42", channel="D0001")
        )
        [stopped] = await fake_slack.wait_posts(1)
        gate.set()
        await gateway.wait_idle()
    assert stopped.text.startswith("Stopped.")
    assert fake_slack.texts() == [stopped.text]
