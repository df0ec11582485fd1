"""The Bot API over aiohttp (channels/telegram/transport.py), driven by python-telegram-bot's
own ``Bot`` against the fake Bot API: what the bot sends arrives whole (form fields, files),
and a server that stalls or is gone is a ``TimedOut`` or ``NetworkError``, as with the
library's own transport."""

from __future__ import annotations

import socket

import pytest
from telegram import Bot
from telegram.error import NetworkError, TimedOut

from channels.telegram.transport import AiohttpRequest
from tests.fakes.telegram import FakeTelegram, random_token


def bot_for(base_url: str, token: str, **timeouts: float) -> Bot:
    return Bot(
        token,
        base_url=f"{base_url}/bot",
        base_file_url=f"{base_url}/file/bot",
        request=AiohttpRequest(connections=4, **timeouts),
        get_updates_request=AiohttpRequest(connections=1),
    )


async def test_messages_and_files_arrive_whole() -> None:
    tg = await FakeTelegram(random_token()).start()
    bot = bot_for(tg.base_url, tg.token)
    try:
        sent = await bot.send_message(chat_id=42, text="héllo & <b>")  # before initialize()
        await bot.initialize()
        await bot.send_document(
            chat_id=42, document=b"%PDF-1.4 body", filename="report.pdf", caption="the report"
        )
    finally:
        await bot.shutdown()
        await tg.stop()
    assert sent.text == "héllo & <b>"
    [message] = [c for c in tg.calls if c.method == "sendMessage"]
    assert message.params["text"] == "héllo & <b>"
    [document] = [c for c in tg.calls if c.method == "sendDocument"]
    assert document.params["caption"] == "the report"
    assert document.params["document"] == "report.pdf"
    assert document.files["document"] == b"%PDF-1.4 body"


async def test_a_stalled_answer_is_timed_out() -> None:
    tg = await FakeTelegram(random_token()).start()
    hold = tg.hold("sendMessage", deliver=False)
    bot = bot_for(tg.base_url, tg.token, read_timeout=0.3)
    try:
        with pytest.raises(TimedOut):
            await bot.send_message(chat_id=42, text="anyone?")
        assert hold.taken
    finally:
        hold.release()
        await bot.shutdown()
        await tg.stop()


async def test_a_server_that_is_gone_is_a_network_error() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    bot = bot_for(f"http://127.0.0.1:{port}", random_token())
    try:
        with pytest.raises(NetworkError, match="aiohttp"):
            await bot.send_message(chat_id=42, text="hello")
    finally:
        await bot.shutdown()


async def test_a_shut_down_transport_sends_nothing() -> None:
    tg = await FakeTelegram(random_token()).start()
    bot = bot_for(tg.base_url, tg.token)
    try:
        await bot.initialize()
        await bot.shutdown()
        with pytest.raises(NetworkError, match="shut down"):
            await bot.send_message(chat_id=42, text="late")
    finally:
        await tg.stop()
    assert not [c for c in tg.calls if c.method == "sendMessage"]


async def test_the_proxy_named_by_the_environment_carries_the_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``HTTP(S)_PROXY`` is honoured as with the library's own transport: the Bot API's host
    here does not resolve, so the call arrives only through the proxy (the fake, which
    answers what is asked of it by absolute URL, as a forwarding proxy would)."""
    tg = await FakeTelegram(random_token()).start()
    for name in ("NO_PROXY", "no_proxy", "http_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", tg.base_url)
    bot = bot_for("http://bot-api.invalid", tg.token)
    try:
        sent = await bot.send_message(chat_id=42, text="via the proxy")
    finally:
        await bot.shutdown()
        await tg.stop()
    assert sent.text == "via the proxy"
