"""Platforms failing (threat model rows 26 and 36), with the real client libraries against the
fakes in tests/fakes/: the Telegram Bot API answering 5xx for a stretch, flood control on one
chat, and the Discord gateway closing with each close code. What a user notices: nothing
accepted is lost or answered twice, and answers arrive once the platform is back; what the
operator notices: reconnects back off (counted here) and fatal closes say what to fix."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from channels.telegram import TelegramChannel
from gateway.config.settings import Settings
from gateway.core.backoff import Backoff
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, held
from tests.fakes.telegram import FAST_PACING, Call, FakeTelegram, section

# The poller's backoff for these tests: the shortest wait is base/2 = 50 ms, so a poller that
# backs off makes at most 20 attempts a second; a hot loop against the local fake makes
# hundreds.
POLL_BACKOFF = (0.1, 0.4)


def channel(settings: Settings) -> TelegramChannel:
    return TelegramChannel(settings, pacing=FAST_PACING, backoff=Backoff(*POLL_BACKOFF))


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
        await tg.wait_for(lambda: len(refused(tg, "sendMessage")) >= 2)
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
    sends = [c.at for c in refused(tg, "sendMessage")]
    # the outbox's retries wait at least half its 1 s base between attempts
    assert all(later - earlier >= 0.45 for earlier, later in itertools.pairwise(sends))
    assert during.last_error is not None and "Bad Gateway" in during.last_error
    assert not during.connected and after.connected and after.last_error is None
    assert "getUpdates failed" in caplog.text and "retrying in" in caplog.text


def refused(tg: FakeTelegram, method: str) -> list[Call]:
    return [c for c in tg.refused if c.method == method]
