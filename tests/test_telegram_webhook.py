"""Acknowledge only what is journaled: webhook secret and status codes, and the polling offset
when the gateway cannot store an update."""

from __future__ import annotations

import asyncio
import socket

import aiohttp
import pytest

from channels.telegram.adapter import TelegramChannel
from channels.telegram.webhook import SECRET_HEADER
from gateway.core.bus import Accepted
from gateway.core.errors import PortInUse, StorageFullError
from gateway.core.messages import InboundMessage
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM
from tests.fakes.records import started
from tests.fakes.telegram import FakeTelegram, fast_channel, section

HOOK = {"mode": "webhook", "webhook_url": "https://bot.example.test/telegram", "webhook_port": 0}


channel = fast_channel


class FlakySink:
    """A gateway intake whose disk is full for the first ``failures`` messages."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.accepted: list[InboundMessage] = []
        self.changed = asyncio.Event()

    async def admits(self, msg: InboundMessage) -> bool:
        return True

    async def publish_inbound(self, msg: InboundMessage) -> Accepted:
        if self.failures:
            self.failures -= 1
            raise StorageFullError("disk full")
        self.accepted.append(msg)
        self.changed.set()
        return Accepted.NEW


def hook_url(telegram: TelegramChannel) -> str:
    assert telegram.webhook is not None
    return f"http://127.0.0.1:{telegram.webhook.port}/telegram"


async def test_webhook_refuses_a_wrong_secret_and_acknowledges_after_journaling(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    settings = make_settings(telegram=section(tg, webhook_secret="s3cret_Token-1", **HOOK))
    telegram = channel(settings)
    update = {"update_id": 5, "message": tg.message("via the webhook")}
    message_key = f"42:{update['message']['message_id']}"
    async with Gateway(settings, channels=[telegram]) as gateway, aiohttp.ClientSession() as http:
        url = hook_url(telegram)
        missing = await http.post(url, json=update)
        wrong = await http.post(url, json=update, headers={SECRET_HEADER: "guess"})
        assert not await gateway.store.journal.seen("telegram", message_key)
        good = await http.post(url, json=update, headers={SECRET_HEADER: "s3cret_Token-1"})
        journaled = await gateway.store.journal.seen("telegram", message_key)
        again = await http.post(url, json=update, headers={SECRET_HEADER: "s3cret_Token-1"})
        [reply] = await tg.wait_sent(1)
        await gateway.wait_idle()
    assert (missing.status, wrong.status, good.status, again.status) == (403, 403, 200, 200)
    assert journaled  # the 200 came after the update was stored
    assert tg.webhook == {
        "url": "https://bot.example.test/telegram",
        "secret_token": "s3cret_Token-1",
        "allowed_updates": ["message", "edited_message", "channel_post", "callback_query"],
    }
    assert "via the webhook" in reply.params["text"]
    assert len(fake_llm.requests) == 1 and len(tg.sent()) == 1


async def test_webhook_answers_500_when_the_update_cannot_be_stored(
    make_settings: SettingsFactory, tg: FakeTelegram
) -> None:
    telegram = channel(make_settings(telegram=section(tg, **HOOK)))
    sink = FlakySink(failures=1)
    await telegram.start(started(sink))
    try:
        secret = tg.webhook["secret_token"] if tg.webhook else ""
        assert len(secret) >= 32  # generated when none is configured
        update = {"update_id": 9, "message": tg.message("store me")}
        async with aiohttp.ClientSession() as http:
            first = await http.post(
                hook_url(telegram), json=update, headers={SECRET_HEADER: secret}
            )
            retry = await http.post(
                hook_url(telegram), json=update, headers={SECRET_HEADER: secret}
            )
    finally:
        await telegram.stop()
    assert (first.status, retry.status) == (500, 200)  # Telegram redelivers after the 500
    assert [m.text for m in sink.accepted] == ["store me"]


async def test_polling_does_not_confirm_an_update_it_could_not_store(
    make_settings: SettingsFactory, tg: FakeTelegram
) -> None:
    telegram = channel(make_settings(telegram=section(tg)))
    sink = FlakySink(failures=2)
    await telegram.start(started(sink))
    try:
        update = await tg.say("do not lose me")
        await asyncio.wait_for(sink.changed.wait(), 10)
        await tg.wait_confirmed(update["update_id"] + 1)
    finally:
        await telegram.stop()
    offsets = [c.params.get("offset") for c in tg.called("getUpdates")]
    fetched_again = [o for o in offsets if o is None or o <= update["update_id"]]
    assert len(fetched_again) >= 3  # fetched, failed twice, fetched again until stored
    assert [m.text for m in sink.accepted] == ["do not lose me"]


class SlowChatSink:
    """An intake that stores the first message of chat 1 only after a message of chat 2 was
    stored, and fails it the first time; it recognises redeliveries like the journal does."""

    def __init__(self) -> None:
        self.accepted: list[InboundMessage] = []
        self.other_chat_stored = asyncio.Event()
        self.failed_once = False

    async def admits(self, msg: InboundMessage) -> bool:
        return True

    async def publish_inbound(self, msg: InboundMessage) -> Accepted:
        if msg.text == "one: first" and not self.failed_once:
            await asyncio.wait_for(self.other_chat_stored.wait(), 10)
            self.failed_once = True
            raise StorageFullError("disk full")
        if any(m.platform_message_id == msg.platform_message_id for m in self.accepted):
            return Accepted.DUPLICATE
        self.accepted.append(msg)
        if msg.chat_id == "2":
            self.other_chat_stored.set()
        return Accepted.NEW


async def test_a_batch_is_stored_chat_by_chat_and_a_failure_holds_the_offset(
    make_settings: SettingsFactory, tg: FakeTelegram
) -> None:
    updates = [
        await tg.say(text, chat_id=chat, user_id=chat)
        for chat, text in ((1, "one: first"), (1, "one: second"), (2, "two: first"))
    ]
    last = await tg.say("two: second", chat_id=2, user_id=2)
    telegram = channel(make_settings(telegram=section(tg, allow_from=["*"])))
    sink = SlowChatSink()
    await telegram.start(started(sink))  # all four arrive in one getUpdates batch
    try:
        await tg.wait_confirmed(last["update_id"] + 1)
    finally:
        await telegram.stop()
    texts = [m.text for m in sink.accepted]
    assert sorted(texts) == ["one: first", "one: second", "two: first", "two: second"]
    assert texts.index("one: first") < texts.index("one: second")  # a chat's order holds
    assert texts.index("two: first") < texts.index("two: second")
    assert texts.index("two: first") < texts.index("one: first")  # chat 2 did not wait
    offsets = [c.params.get("offset") for c in tg.called("getUpdates")]
    assert offsets[1] in (None, updates[0]["update_id"])  # not confirmed past the failure


async def test_a_webhook_port_taken_when_it_binds_names_the_setting(
    make_settings: SettingsFactory, tg: FakeTelegram
) -> None:
    """Taken between the gateway's check and the bind (or when a cluster node comes to
    lead): the start fails naming the port's setting, with the exit status of a taken port
    (before: an OSError traceback); Telegram was not told of a webhook."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        telegram = channel(make_settings(telegram=section(tg, **{**HOOK, "webhook_port": port})))
        with pytest.raises(PortInUse) as caught:
            await telegram.start(started(FlakySink(0)))
    assert caught.value.field == "telegram.webhook_port"
    assert f"another program listens on port {port}" in str(caught.value)
    assert "SWITCHBOARD_TELEGRAM__WEBHOOK_PORT" in str(caught.value)
    assert tg.webhook is None
