"""The gateway's HTTP servers over real sockets: a connection that sends no whole request in
time is closed, and no client holds more connections than its share (threat: a client that
opens thousands of half-open connections took every file descriptor, and the gateway could
answer nobody, its model calls included).

Every server the gateway runs is covered: the web server, Slack's Events API and Telegram's
webhook. The deadlines are made short in the settings; each test waits for the close."""

from __future__ import annotations

import asyncio
import resource
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest

from channels.slack.adapter import SlackChannel
from gateway.core.system.connections import raise_open_files_limit
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.slack import BOT_TOKEN, SIGNING_SECRET, FakeSlack
from tests.fakes.telegram import FakeTelegram, fast_channel, section
from tests.test_web_server import serving

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]
HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # a request head without its end
QUICK = {"http_header_timeout_seconds": 0.3}


async def connect(port: int, source: str = "127.0.0.1") -> Streams:
    """A client connection; ``source``: the client's address (127.0.0.2 is another client
    on the same machine)."""
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))


async def until_closed(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection."""
    async with asyncio.timeout(5):
        try:
            return await reader.read()
        except ConnectionResetError:
            return b""


@asynccontextmanager
async def web_server(settings_for: SettingsFactory, **limits: float) -> AsyncIterator[int]:
    settings = settings_for(web={"port": 0}, limits=limits)
    async with serving(settings) as (gateway, _, _):
        assert gateway.web is not None and gateway.web.port is not None
        yield gateway.web.port


async def test_a_connection_that_sends_no_whole_request_in_time_is_closed(
    make_settings: SettingsFactory,
) -> None:
    async with web_server(make_settings, **QUICK) as port:
        silent, _ = await connect(port)
        partial, writer = await connect(port)
        writer.write(HEAD)
        assert await until_closed(silent) == b""
        assert await until_closed(partial) == b""
        # a whole request is answered, and its connection then kept only as long idle
        reader, writer = await connect(port)
        writer.write(HEAD + b"\r\n")
        answer = await until_closed(reader)
    assert answer.startswith(b"HTTP/1.1 200 OK") and b'{"status": "ok"}' in answer


async def test_a_request_head_sent_a_little_at_a_time_is_cut_off_at_the_deadline(
    make_settings: SettingsFactory,
) -> None:
    """The deadline counts from the connection's start: a byte now and then does not renew it."""
    async with web_server(make_settings, **QUICK) as port:
        reader, writer = await connect(port)
        writer.write(HEAD)

        async def trickle() -> None:
            while True:
                writer.write(b"X-Padding: 1\r\n")
                await writer.drain()
                await asyncio.sleep(0.02)  # the client's pace, not a wait for the server

        sending = asyncio.create_task(trickle())
        try:
            # cut off without an answer, well before aiohttp's 128-header limit would
            # answer 400
            assert await until_closed(reader) == b""
        finally:
            sending.cancel()
            await asyncio.gather(sending, return_exceptions=True)


async def test_one_client_holds_at_most_its_share_and_others_still_get_in(
    make_settings: SettingsFactory,
) -> None:
    limits = {"http_connections_per_client": 3, "http_header_timeout_seconds": 60}
    async with web_server(make_settings, **limits) as port:
        held = [await connect(port) for _ in range(3)]
        refused, _ = await connect(port)
        assert (await until_closed(refused)).startswith(b"HTTP/1.1 503 Service Unavailable")
        reader, writer = await connect(port, source="127.0.0.2")
        writer.write(HEAD + b"Connection: close\r\n\r\n")
        assert (await until_closed(reader)).startswith(b"HTTP/1.1 200 OK")
        for _, writer in held:
            writer.close()


async def test_the_server_holds_at_most_its_connections_from_all_clients(
    make_settings: SettingsFactory,
) -> None:
    limits = {"http_connections": 8, "http_header_timeout_seconds": 60}
    async with web_server(make_settings, **limits) as port:
        held = [await connect(port) for _ in range(8)]
        refused, _ = await connect(port, source="127.0.0.2")
        assert (await until_closed(refused)).startswith(b"HTTP/1.1 503 Service Unavailable")
        for _, writer in held:
            writer.close()


async def test_slacks_events_server_closes_a_connection_without_a_whole_request(
    make_settings: SettingsFactory, fake_slack: FakeSlack
) -> None:
    slack = {
        "bot_token": BOT_TOKEN,
        "signing_secret": SIGNING_SECRET,
        "base_url": fake_slack.api_url,
        "http_port": 0,
    }
    settings = make_settings(slack=slack, limits=QUICK)
    channel = SlackChannel(settings.slack, settings.channel_context())
    async with Gateway(settings, channels=[channel]):
        assert channel.port is not None
        reader, writer = await connect(channel.port)
        writer.write(b"POST /slack/events HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        assert await until_closed(reader) == b""


async def test_telegrams_webhook_server_closes_a_connection_without_a_whole_request(
    make_settings: SettingsFactory, tg: FakeTelegram
) -> None:
    hook = {"mode": "webhook", "webhook_url": "https://bot.example.test/tg", "webhook_port": 0}
    settings = make_settings(telegram=section(tg, **hook), limits=QUICK)
    telegram = fast_channel(settings)
    async with Gateway(settings, channels=[telegram]):
        assert telegram.webhook is not None
        reader, writer = await connect(telegram.webhook.port)
        writer.write(b"POST /tg HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        assert await until_closed(reader) == b""


@pytest.fixture
def open_files_limit() -> Iterator[tuple[int, int]]:
    """The process's limit on open files, put back after the test."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    yield soft, hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_soft_limit_on_open_files_is_raised_to_the_hard_one(
    open_files_limit: tuple[int, int],
) -> None:
    _, hard = open_files_limit
    if hard == resource.RLIM_INFINITY or hard < 256:
        pytest.skip("a hard limit this test cannot lower the soft one under")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard // 2, hard))
    assert raise_open_files_limit() == hard
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
