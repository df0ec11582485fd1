"""Platforms failing (threat model rows 26 and 36), with the real client libraries against the
fakes in tests/fakes/: the Telegram Bot API answering 5xx for a stretch, flood control on one
chat, the Discord gateway closing with each close code, and the Slack socket dropping
mid-delivery. (An IMAP server restart: tests/test_email_inbox.py.) What a user notices: nothing
accepted is lost or answered twice, and answers arrive once the platform is back; what the
operator notices: reconnects back off (counted here) and fatal closes say what to fix."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time

import pytest

from channels.discord.adapter import DiscordChannel
from channels.discord.connection import FATAL_CLOSE_CODES, ReconnectPolicy
from channels.slack.adapter import SlackChannel
from channels.telegram.adapter import TelegramChannel
from gateway.config.settings import Settings
from gateway.core.backoff import Backoff
from gateway.core.errors import ConfigError
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.discord import FakeDiscord, user
from tests.fakes.llm import FakeLLM, held
from tests.fakes.slack import APP_TOKEN, BOT_TOKEN, FakeSlack, dm_event, event_body
from tests.fakes.telegram import FAST_PACING, Call, FakeTelegram, section

# The poller's backoff for these tests: the shortest wait is base/2 = 50 ms, so a poller that
# backs off makes at most 20 attempts a second; a hot loop against the local fake makes
# hundreds.
POLL_BACKOFF = (0.1, 0.4)


def channel(settings: Settings) -> TelegramChannel:
    return TelegramChannel(
        settings.telegram,
        settings.channel_context(),
        pacing=FAST_PACING,
        backoff=Backoff(*POLL_BACKOFF),
    )


async def test_bot_api_5xx_for_a_stretch_loses_nothing_doubles_nothing_and_backs_off(
    make_settings: SettingsFactory,
    fake_llm: FakeLLM,
    tg: FakeTelegram,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = make_settings(telegram=section(tg, allow_from=["42", "43"]))
    telegram = channel(settings)
    gate = asyncio.Event()
    fake_llm.queue(held(gate, "the answer written during the outage"))
    async with Gateway(settings, channels=[telegram]) as gateway:
        await tg.say("a question just before the outage")
        await fake_llm.wait_for_requests(1)
        await tg.go_down(502, "Bad Gateway")
        down_at = time.perf_counter()
        gate.set()  # the answer is ready while every call fails
        await tg.say("sent during the outage")
        await tg.say("another chat, during the outage", chat_id=43, user_id=43)
        # the reply is retried by the outbox and the poller keeps trying, both backing off
        await tg.wait_for(lambda: len(outbox_calls(tg)) >= 2)
        await tg.wait_for(lambda: len(refused(tg, "getUpdates")) >= 3)
        during = telegram.health()
        await tg.come_back()
        outage = time.perf_counter() - down_at
        await tg.wait_for(lambda: len(tg.sent(42)) >= 2 and len(tg.sent(43)) >= 1)
        await gateway.wait_idle()
        after = telegram.health()
    assert tg.texts(42) == [
        "the answer written during the outage",
        "echo: sent during the outage",
    ]
    assert tg.texts(43) == ["echo: another chat, during the outage"]
    assert len(fake_llm.requests) == 3  # one turn per message, none repeated
    polls = refused(tg, "getUpdates")
    assert len(polls) <= outage / (POLL_BACKOFF[0] / 2) + 2  # backoff, not a hot loop
    sends = [c.at for c in outbox_calls(tg)]
    # the outbox's retries wait at least half its 1 s base between attempts
    assert all(later - earlier >= 0.45 for earlier, later in itertools.pairwise(sends))
    assert during.last_error is not None and "Bad Gateway" in during.last_error
    assert not during.connected and after.connected and after.last_error is None
    assert "getUpdates failed" in caplog.text and "retrying in" in caplog.text


def refused(tg: FakeTelegram, method: str) -> list[Call]:
    return [c for c in tg.refused if c.method == method]


def outbox_calls(tg: FakeTelegram) -> list[Call]:
    """The outbox's refused attempts: the first send, then each retry's first call (after
    a 5xx a send may have arrived: a retry first probes for it, channels/telegram/recovery.py)."""
    return [c for c in tg.refused if c.method in ("sendMessage", "editMessageReplyMarkup")]


# -- Discord: the gateway closing with each close code ------------------------------------

OWNER = user(42, "dana", "Dana")
RESUMABLE = [1000, 1001, 1006, 1011, 4000, 4001, 4002, 4003, 4005, 4008]
NEW_SESSION = [4007, 4009]
FATAL = [4004, 4010, 4011, 4012, 4013, 4014]
# The reconnect policy for these tests: the shortest wait after a failure is base/2 = 25 ms.
DISCORD_BASE = 0.05


def discord_settings(make_settings: SettingsFactory) -> Settings:
    return make_settings(discord={"token": "test-token", "allow_from": ["42"]})


def discord_channel(settings: Settings) -> DiscordChannel:
    policy = ReconnectPolicy(base=DISCORD_BASE, cap=0.2)
    return DiscordChannel(
        settings.discord, settings.channel_context(), policy=policy, guild_ready_timeout=0.01
    )


@pytest.mark.parametrize("code", RESUMABLE + NEW_SESSION)
async def test_discord_close_code_resumes_or_identifies_once_and_loses_nothing(
    code: int, make_settings: SettingsFactory, fake_llm: FakeLLM, fake_discord: FakeDiscord
) -> None:
    settings = discord_settings(make_settings)
    async with Gateway(settings, channels=[discord_channel(settings)]) as gateway:
        await fake_discord.dm("before the close", author=OWNER)
        await fake_discord.wait_posts(1)
        await fake_discord.drop(code=code)
        await fake_discord.until(lambda: fake_discord.resumes + fake_discord.identifies == 2)
        await fake_discord.dm("after the close", author=OWNER)
        await fake_discord.wait_posts(2)
        await gateway.wait_idle()
    assert fake_discord.texts() == ["echo: before the close", "echo: after the close"]
    assert fake_discord.connections == 2  # one reconnect, no storm
    if code in NEW_SESSION:  # the session is gone: a fresh IDENTIFY, no RESUME Discord refuses
        assert (fake_discord.identifies, fake_discord.resumes) == (2, 0)
    else:
        assert (fake_discord.identifies, fake_discord.resumes) == (1, 1)


@pytest.mark.parametrize("code", FATAL)
async def test_discord_fatal_close_code_stops_reconnecting_and_names_the_fix(
    code: int,
    make_settings: SettingsFactory,
    fake_llm: FakeLLM,
    fake_discord: FakeDiscord,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = discord_settings(make_settings)
    channel = discord_channel(settings)
    async with Gateway(settings, channels=[channel]):
        await fake_discord.drop(code=code)
        with pytest.raises(TimeoutError):  # never reconnects (the policy would within 50 ms)
            await fake_discord.until(lambda: fake_discord.connections > 1, timeout=0.5)
        health = channel.health()
    assert fake_discord.connections == 1
    assert not health.connected
    assert health.last_error is not None and f"closed with {code}: " in health.last_error
    assert health.last_error.split(": ", 1)[1] == FATAL_CLOSE_CODES[code]
    [logged] = [r for r in caplog.records if r.levelno == logging.ERROR and "discord" in r.name]
    assert FATAL_CLOSE_CODES[code] in logged.getMessage()


@pytest.mark.parametrize(
    ("code", "fix"),
    [(4004, "SWITCHBOARD_DISCORD__TOKEN"), (4014, "MESSAGE CONTENT INTENT")],
)
async def test_discord_refusing_the_first_identify_fails_the_start_with_the_fix(
    code: int, fix: str, make_settings: SettingsFactory, fake_discord: FakeDiscord
) -> None:
    fake_discord.close_identify_with = code
    settings = discord_settings(make_settings)
    with pytest.raises(ConfigError, match=fix):
        await Gateway(settings, channels=[discord_channel(settings)]).start()
    assert fake_discord.connections == 1 and fake_discord.identifies == 1


async def test_discord_sessions_closed_at_once_back_off_instead_of_storming(
    make_settings: SettingsFactory, fake_llm: FakeLLM, fake_discord: FakeDiscord
) -> None:
    settings = discord_settings(make_settings)
    async with Gateway(settings, channels=[discord_channel(settings)]) as gateway:
        fake_discord.close_after_ready = 4000  # every RESUMED is followed by a close
        started = time.perf_counter()
        await fake_discord.drop(code=4000)
        await fake_discord.until(lambda: fake_discord.connections >= 8)
        elapsed = time.perf_counter() - started
        count = fake_discord.connections - 1
        fake_discord.close_after_ready = None
        await fake_discord.dm("still there?", author=OWNER)
        await fake_discord.wait_posts(1)
        await gateway.wait_idle()
    # discord.py alone RESUMEs at once, forever; the policy waits at least base/2 each time
    assert count <= elapsed / (DISCORD_BASE / 2) + 1
    assert fake_discord.texts() == ["echo: still there?"]


# -- Slack: the Socket Mode connection dropping mid-delivery ------------------------------


async def test_slack_socket_dropped_mid_delivery_then_redelivered_is_answered_once(
    make_settings: SettingsFactory, fake_llm: FakeLLM, fake_slack: FakeSlack
) -> None:
    base = {"bot_token": BOT_TOKEN, "app_token": APP_TOKEN, "base_url": fake_slack.api_url}
    settings = make_settings(slack={**base, "allow_from": ["U42"]})
    channel = SlackChannel(settings.slack, settings.channel_context(), ping_interval=1.0)
    body = event_body(dm_event("did this arrive?", user="U42", ts="900.000001"))
    async with Gateway(settings, channels=[channel]) as gateway:
        await fake_slack.push(body)
        await fake_slack.drop()  # whether or not the ack made it out, Slack may send it again
        await fake_slack.until(lambda: fake_slack.connections == 2)
        again = await fake_slack.push(body, retry_attempt=1)
        await fake_slack.wait_ack(again)  # acknowledged: Slack stops retrying
        await fake_slack.push(event_body(dm_event("and this?", user="U42", ts="900.000002")))
        await fake_slack.wait_posts(2)
        await gateway.wait_idle()
        health = channel.health()
    assert fake_slack.texts() == ["echo: did this arrive?", "echo: and this?"]
    assert len(fake_llm.requests) == 2
    assert health.connected and fake_slack.count("apps.connections.open") == 2
