"""Requests anyone can send with headers or bodies the gateway cannot read (a signature in
letters outside ASCII, bytes that are not UTF-8 in a token or a cookie, a timestamp that is
no number, JSON nested a hundred thousand deep): each gets a plain 4xx, and nothing is
logged as an error. Every one of them was a 500 with a traceback in the log, which also
let a client flood the log away.

Sent over raw sockets: an HTTP client library would not send these bytes."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from channels.slack.adapter import SlackChannel
from channels.whatsapp.adapter import WhatsAppChannel
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.slack import BOT_TOKEN, SIGNING_SECRET, FakeSlack
from tests.fakes.telegram import FakeTelegram, fast_channel, section
from tests.fakes.whatsapp import FakeGraph
from tests.test_whatsapp import section as whatsapp_section

HOOK_SECRET = "hook-secret-0123456789abcdef"
WEB_TOKEN = "web-token-0123456789abcdefgh"
MEMBER_TOKEN = "member-api-token-0123456789"
DEEP = b"[" * 100_000 + b"]" * 100_000
NOT_UTF8 = b"abc\xff\xfe"


async def exchange(port: int, request: bytes) -> tuple[int, bytes]:
    """Send ``request`` as it is; the status and the whole answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        async with asyncio.timeout(10):
            answer = await reader.read()
    finally:
        writer.close()
    return int(answer.split(b" ", 2)[1]), answer


def http(method: str, path: str, headers: list[bytes], body: bytes = b"") -> bytes:
    lines = [
        f"{method} {path} HTTP/1.1".encode(),
        b"Host: 127.0.0.1",
        b"Connection: close",
        f"Content-Length: {len(body)}".encode(),
        *headers,
    ]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def no_errors_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        f"{r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.levelno >= logging.ERROR or r.exc_info
    ]


@asynccontextmanager
async def gateway_port(make_settings: SettingsFactory, tg: FakeTelegram) -> AsyncIterator[int]:
    settings = make_settings(
        telegram=section(tg, owners=["42"]),
        web={"port": 0, "token": WEB_TOKEN},
        hooks={"ci": {"secret": HOOK_SECRET, "deliver_to": "telegram:42"}},
        api={"enabled": True, "tokens": [{"name": "script", "token": MEMBER_TOKEN}]},
    )
    async with Gateway(settings, channels=[fast_channel(settings)]) as gateway:
        assert gateway.web is not None and gateway.web.port is not None
        yield gateway.web.port


def hook(*headers: bytes) -> bytes:
    return http("POST", "/hooks/ci", [b"Content-Type: application/json", *headers], b"{}")


NOW = str(int(time.time())).encode()
MALFORMED = [
    pytest.param(
        hook(
            b"X-Switchboard-Signature: t=" + NOW + ",v1=é".encode(), b"X-Switchboard-Delivery: d1"
        ),
        401,
        id="hook signature outside ASCII",
    ),
    pytest.param(
        hook(b"X-Switchboard-Signature: t=" + NOW + b",v1=\xff\xfe", b"X-Switchboard-Delivery: d2"),
        401,
        id="hook signature not UTF-8",
    ),
    pytest.param(hook(b"Stripe-Signature: t=" + NOW + ",v1=ü".encode()), 401, id="stripe"),
    pytest.param(hook("X-Hub-Signature-256: sha256=é".encode()), 401, id="github"),
    pytest.param(
        http("GET", "/v1/models", [b"Authorization: Bearer " + NOT_UTF8]), 401, id="api token"
    ),
    pytest.param(
        http("GET", "/api/status", [b"Authorization: Bearer " + NOT_UTF8]), 401, id="web token"
    ),
    pytest.param(
        http("GET", "/api/status", [b"Cookie: switchboard_auth=" + NOT_UTF8]), 401, id="cookie"
    ),
    pytest.param(
        http(
            "POST",
            "/v1/chat/completions",
            [b"Authorization: Bearer " + MEMBER_TOKEN.encode(), b"Content-Type: application/json"],
            DEEP,
        ),
        400,
        id="deep JSON to the chat API",
    ),
    pytest.param(
        http(
            "POST",
            "/v1/tasks",
            [b"Authorization: Bearer " + MEMBER_TOKEN.encode(), b"Content-Type: application/json"],
            DEEP,
        ),
        400,
        id="deep JSON to the task API",
    ),
]


@pytest.mark.parametrize(("request_bytes", "status"), MALFORMED)
async def test_a_malformed_request_to_the_web_server_is_a_clean_refusal(
    make_settings: SettingsFactory,
    tg: FakeTelegram,
    caplog: pytest.LogCaptureFixture,
    request_bytes: bytes,
    status: int,
) -> None:
    async with gateway_port(make_settings, tg) as port:
        answered, answer = await exchange(port, request_bytes)
    assert answered == status, answer[:300]
    assert no_errors_logged(caplog) == []


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param(
            ["X-Slack-Request-Timestamp: " + str(int(time.time())), "X-Slack-Signature: v0=é"],
            id="signature",
        ),
        pytest.param(
            ["X-Slack-Request-Timestamp: abc", "X-Slack-Signature: v0=00"], id="timestamp"
        ),
        pytest.param(["X-Slack-Request-Timestamp: ²", "X-Slack-Signature: v0=00"], id="digit"),
    ],
)
async def test_a_malformed_signature_to_slacks_events_server_is_a_clean_refusal(
    make_settings: SettingsFactory,
    fake_slack: FakeSlack,
    caplog: pytest.LogCaptureFixture,
    headers: list[str],
) -> None:
    slack = {
        "bot_token": BOT_TOKEN,
        "signing_secret": SIGNING_SECRET,
        "base_url": fake_slack.api_url,
        "http_port": 0,
    }
    settings = make_settings(slack=slack)
    channel = SlackChannel(settings.slack, settings.channel_context())
    async with Gateway(settings, channels=[channel]):
        assert channel.port is not None
        request = http(
            "POST",
            "/slack/events",
            [b"Content-Type: application/json", *(h.encode() for h in headers)],
            b'{"type": "event_callback"}',
        )
        answered, answer = await exchange(channel.port, request)
    assert answered == 401, answer[:300]
    assert no_errors_logged(caplog) == []


async def test_a_body_that_is_not_utf8_to_slacks_events_server_is_a_clean_refusal(
    make_settings: SettingsFactory, fake_slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    slack = {
        "bot_token": BOT_TOKEN,
        "signing_secret": SIGNING_SECRET,
        "base_url": fake_slack.api_url,
        "http_port": 0,
    }
    settings = make_settings(slack=slack)
    channel = SlackChannel(settings.slack, settings.channel_context())
    async with Gateway(settings, channels=[channel]):
        assert channel.port is not None
        headers = [
            b"Content-Type: application/json",
            b"X-Slack-Request-Timestamp: " + NOW,
            b"X-Slack-Signature: v0=00",
        ]
        answered, answer = await exchange(
            channel.port, http("POST", "/slack/events", headers, b'{"x": "\xff"}')
        )
    assert answered == 401, answer[:300]
    assert no_errors_logged(caplog) == []


async def test_a_secret_token_that_is_not_utf8_to_telegrams_webhook_is_refused(
    make_settings: SettingsFactory, tg: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    hook_mode = {"mode": "webhook", "webhook_url": "https://bot.example.test/tg", "webhook_port": 0}
    settings = make_settings(telegram=section(tg, webhook_secret="s3cret_Token-1", **hook_mode))
    telegram = fast_channel(settings)
    async with Gateway(settings, channels=[telegram]):
        assert telegram.webhook is not None
        request = http(
            "POST",
            "/telegram",
            [b"X-Telegram-Bot-Api-Secret-Token: " + NOT_UTF8, b"Content-Type: application/json"],
            b"{}",
        )
        answered, answer = await exchange(telegram.webhook.port, request)
    assert answered == 403, answer[:300]
    assert no_errors_logged(caplog) == []


async def test_a_signature_that_is_not_utf8_to_whatsapps_webhook_is_refused(
    make_settings: SettingsFactory, graph: FakeGraph, caplog: pytest.LogCaptureFixture
) -> None:
    settings = make_settings(whatsapp=whatsapp_section(graph), web={"port": 0})
    channel = WhatsAppChannel(settings.whatsapp, settings.channel_context())
    async with Gateway(settings, channels=[channel]) as gateway:
        assert gateway.web is not None and gateway.web.port is not None
        request = http(
            "POST",
            "/whatsapp/webhook",
            [b"X-Hub-Signature-256: sha256=" + NOT_UTF8, b"Content-Type: application/json"],
            b"{}",
        )
        answered, answer = await exchange(gateway.web.port, request)
    assert answered == 401, answer[:300]
    assert no_errors_logged(caplog) == []
