"""Chats the bot knows: "post this in #general on Slack", asked on Telegram, lands in Slack's
#general (found by name with the ``chats`` tool), and only after the person approved it:
chat names are whatever their owners typed (outside content), so the send that follows the
lookup waits for the owner's tap, which also confirms a first send there.
"""

from __future__ import annotations

import asyncio

from channels.slack.adapter import SlackChannel
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, calls, text
from tests.fakes.slack import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.fakes.telegram import FakeTelegram, fast_channel, section

OWNER = 42
FAMILY = -100555


async def test_post_in_general_from_telegram_lands_in_slacks_general(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram, fake_slack: FakeSlack
) -> None:
    settings = make_settings(
        telegram=section(tg, owners=[str(OWNER)], group_allow_from=[str(FAMILY)]),
        slack={"bot_token": BOT_TOKEN, "app_token": APP_TOKEN, "base_url": fake_slack.api_url},
    )
    fake_slack.channels.update({"C0RANDOM": "random", "C0GENERAL": "general"})
    post = {"channel": "slack", "chat_id": "C0GENERAL", "content": "Standup moves to 10:00"}
    fake_llm.queue(
        calls(("chats", {"query": "general"})),
        calls(("message", post)),
        text("Posted in #general."),
        calls(("chats", {})),
        text("I am in #general, #random and the family group."),
    )
    channels = [
        fast_channel(settings),
        SlackChannel(settings.slack, settings.channel_context(), ping_interval=1.0),
    ]

    async def say(words: str, answers: int) -> None:
        await tg.say(words, user_id=OWNER, chat_id=OWNER)
        await tg.wait_sent(answers)
        await asyncio.wait_for(gateway.wait_idle(), 10)

    async with Gateway(settings, channels=channels) as gateway:
        await tg.say("dinner at 8?", user_id=OWNER, chat_id=FAMILY, chat_type="supergroup")
        await asyncio.wait_for(gateway.wait_idle(), 10)
        await say("post 'Standup moves to 10:00' in #general on Slack", 1)
        [request] = tg.sent(OWNER)
        posted_before_yes = fake_slack.texts()
        code = request.params["text"].split("/approve ", 1)[1].split()[0]
        await tg.press(request, f"/approve {code}", user_id=OWNER)
        await fake_slack.wait_posts(1)
        await tg.wait_sent(3, chat_id=OWNER)  # "Approved", then the answer
        await asyncio.wait_for(gateway.wait_idle(), 10)
        await say("which chats are you in?", 4)
        sends = await gateway.store.audit.recent(kind="cross-chat-send")
    _, asked, _, _, listed = fake_llm.requests
    assert "slack chat_id=C0GENERAL #general" in asked.tool_results[0]
    assert "C0RANDOM" not in asked.tool_results[0]  # narrowed by the query
    assert posted_before_yes == []  # the send waits for the person's yes
    assert "chat names" in request.params["text"] and "C0GENERAL" in request.params["text"]
    assert [(p.channel, p.text) for p in fake_slack.posted] == [
        ("C0GENERAL", "Standup moves to 10:00")
    ]
    assert sends and sends[0].detail["target"] == "slack:C0GENERAL"
    everything = listed.tool_results[-1]
    assert "configured channels: telegram, slack" in everything
    assert f"telegram chat_id={FAMILY} Group {FAMILY} (group)" in everything  # its title
    assert "#random" in everything
