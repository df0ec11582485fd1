"""Slack's HTTP Events API mode, and acknowledgement only after journaling (both modes).

Requests are signed for real with slack_sdk's ``SignatureVerifier`` over the raw body, as
Slack signs them; bolt's own verification in the channel accepts or refuses them.
"""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from channels.slack.adapter import SlackChannel
from gateway.config.settings import Settings
from gateway.core.bus import Accepted
from gateway.core.errors import PortInUse, StorageFullError
from gateway.core.messages import InboundMessage
from gateway.runtime.app import Gateway
from tests.fakes.llm import FakeLLM
from tests.fakes.records import started
from tests.fakes.slack import (
    APP_TOKEN,
    BOT_TOKEN,
    SIGNING_SECRET,
    FakeSlack,
    dm_event,
    event_body,
    post_signed,
)


@pytest.fixture
def http_settings(
    make_settings: Callable[..., Settings], fake_slack: FakeSlack
) -> Callable[..., Settings]:
    def build(**section: Any) -> Settings:
        base = {
            "bot_token": BOT_TOKEN,
            "signing_secret": SIGNING_SECRET,
            "base_url": fake_slack.api_url,
            "http_port": 0,
        }
        # streamed answers have tests of their own (tests/test_streaming_edits.py)
        return make_settings(slack={**base, "streaming": False, **section})

    return build


@asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[tuple[Gateway, str]]:
    channel = SlackChannel(settings.slack, settings.channel_context())
    assert channel.mode == "http"
    async with Gateway(settings, channels=[channel]) as gateway:
        yield gateway, f"http://127.0.0.1:{channel.port}/slack/events"


class FlakySink:
    """An inbound sink whose storage fails until told otherwise (a full disk, say)."""

    def __init__(self) -> None:
        self.failing = True
        self.accepted: list[InboundMessage] = []

    async def admits(self, msg: InboundMessage) -> bool:
        return True

    async def publish_inbound(self, msg: InboundMessage) -> Accepted:
        if self.failing:
            raise StorageFullError("disk full")
        self.accepted.append(msg)
        return Accepted.NEW


async def test_signed_dm_round_trip(
    fake_slack: FakeSlack, fake_llm: FakeLLM, http_settings: Callable[..., Settings]
) -> None:
    async with running(http_settings(allow_from=["U42"])) as (gateway, url):
        body = event_body(dm_event("hello over http", user="U42", ts="100.000001"))
        assert await post_signed(url, body) == 200
        [answer] = await fake_slack.wait_posts(1)
        await gateway.wait_idle()
    assert (answer.channel, answer.text) == ("D0001", "echo: hello over http")


async def test_forged_and_old_signatures_are_refused_before_anything_is_stored(
    fake_slack: FakeSlack, fake_llm: FakeLLM, http_settings: Callable[..., Settings]
) -> None:
    async with running(http_settings(allow_from=["U42"])) as (gateway, url):
        forged = event_body(dm_event("forged", user="U42", ts="200.000001"))
        wrong_key = await post_signed(url, forged, secret="not-the-secret")
        tampered = await post_signed(url, forged, signature="v0=" + "0" * 64)
        stale = event_body(dm_event("replayed", user="U42", ts="200.000002"))
        old = await post_signed(url, stale, timestamp=int(time.time()) - 6 * 60)
        await gateway.wait_idle()
        counts = await gateway.store.journal.counts()
    assert (wrong_key, tampered, old) == (401, 401, 401)
    assert sum(counts.values()) == 0  # nothing journaled
    assert fake_slack.posted == [] and fake_llm.requests == []


async def test_the_same_event_four_times_makes_one_turn(
    fake_slack: FakeSlack, fake_llm: FakeLLM, http_settings: Callable[..., Settings]
) -> None:
    body = event_body(dm_event("just once", user="U42", ts="300.000001"), event_id="EvSAME")
    async with running(http_settings(allow_from=["U42"])) as (gateway, url):
        statuses = [await post_signed(url, body)]
        statuses += [await post_signed(url, body, retry_num=n) for n in (1, 2, 3)]
        await fake_slack.wait_posts(1)
        await gateway.wait_idle()
    assert statuses == [200, 200, 200, 200]
    assert fake_slack.texts() == ["echo: just once"]
    assert len(fake_llm.requests) == 1


async def test_a_retry_whose_first_delivery_never_arrived_is_processed(
    fake_slack: FakeSlack, fake_llm: FakeLLM, http_settings: Callable[..., Settings]
) -> None:
    body = event_body(dm_event("second try", user="U42", ts="400.000001"))
    async with running(http_settings(allow_from=["U42"])) as (gateway, url):
        assert await post_signed(url, body, retry_num=1) == 200
        await fake_slack.wait_posts(1)
        await gateway.wait_idle()
    assert fake_slack.texts() == ["echo: second try"]


async def test_url_verification_is_answered(
    fake_slack: FakeSlack, fake_llm: FakeLLM, http_settings: Callable[..., Settings]
) -> None:
    async with running(http_settings()) as (_, url):
        status = await post_signed(url, {"type": "url_verification", "challenge": "abc123"})
    assert status == 200


async def test_http_acknowledges_only_what_was_journaled(
    fake_slack: FakeSlack, http_settings: Callable[..., Settings]
) -> None:
    settings = http_settings()
    channel, sink = SlackChannel(settings.slack, settings.channel_context()), FlakySink()
    await channel.start(started(sink))
    try:
        url = f"http://127.0.0.1:{channel.port}/slack/events"
        body = event_body(dm_event("keep me", user="U42", ts="500.000001"))
        failed = await post_signed(url, body)
        sink.failing = False
        retried = await post_signed(url, body, retry_num=1)
    finally:
        await channel.stop()
    assert (failed, retried) == (500, 200)  # Slack redelivers what we did not acknowledge
    assert [m.text for m in sink.accepted] == ["keep me"]


async def test_socket_mode_acknowledges_only_what_was_journaled(
    fake_slack: FakeSlack, make_settings: Callable[..., Settings]
) -> None:
    settings = make_settings(
        slack={"bot_token": BOT_TOKEN, "app_token": APP_TOKEN, "base_url": fake_slack.api_url}
    )
    channel, sink = SlackChannel(settings.slack, settings.channel_context()), FlakySink()
    await channel.start(started(sink))
    try:
        body = event_body(dm_event("keep me", user="U42", ts="600.000001"))
        first = await fake_slack.push(body)
        with pytest.raises(TimeoutError):
            await fake_slack.wait_ack(first, timeout=0.5)
        sink.failing = False
        retry = await fake_slack.push(body, retry_attempt=1)
        await fake_slack.wait_ack(retry)
    finally:
        await channel.stop()
    assert first not in fake_slack.acks
    assert [m.text for m in sink.accepted] == ["keep me"]


async def test_an_events_port_taken_when_it_binds_names_the_setting(
    http_settings: Callable[..., Settings],
) -> None:
    """Taken between the gateway's check and the bind: the start fails naming the port's
    setting, with the exit status of a taken port (before: an OSError traceback)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = http_settings(http_port=port)
        slack = SlackChannel(settings.slack, settings.channel_context())
        with pytest.raises(PortInUse) as caught:
            await slack.start(started(FlakySink()))
        await slack.stop()
    assert caught.value.field == "slack.http_port"
    assert f"another program listens on port {port}" in str(caught.value)
    assert "SWITCHBOARD_SLACK__HTTP_PORT" in str(caught.value)
