"""The Slack channel in Socket Mode end to end: real slack-bolt/slack_sdk against tests/fakes/slack.py."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from channels import build_channels
from channels.slack.adapter import SlackChannel
from channels.slack.settings import SlackSettings
from gateway.cli.onboard.channel import onboard_channel
from gateway.config.plugins import channel_plugins
from gateway.config.settings import Settings, load_settings
from gateway.core.errors import ConfigError
from gateway.core.messages import Attachment, OutboundMessage
from gateway.runtime.app import Gateway
from tests.fakes.llm import FakeLLM, text
from tests.fakes.records import started
from tests.fakes.slack import (
    APP_TOKEN,
    BOT_TOKEN,
    FakeSlack,
    dm_event,
    dm_of,
    event_body,
    mention_event,
)

DANA = {"display_name": "Dana"}


@pytest.fixture
def slack_settings(
    make_settings: Callable[..., Settings], fake_slack: FakeSlack
) -> Callable[..., Settings]:
    def build(**section: Any) -> Settings:
        base = {"bot_token": BOT_TOKEN, "app_token": APP_TOKEN, "base_url": fake_slack.api_url}
        # streamed answers have tests of their own (tests/test_streaming_edits.py)
        return make_settings(slack={**base, "streaming": False, **section})

    return build


@asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[tuple[Gateway, SlackChannel]]:
    channel = SlackChannel(settings.slack, settings.channel_context(), ping_interval=1.0)
    async with Gateway(settings, channels=[channel]) as gateway:
        yield gateway, channel


async def test_dm_round_trip_acknowledged_after_journaling(
    fake_slack: FakeSlack, fake_llm: FakeLLM, slack_settings: Callable[..., Settings]
) -> None:
    async with running(slack_settings(allow_from=["U42"])) as (gateway, _):
        envelope = await fake_slack.push(event_body(dm_event("hello", user="U42", ts="100.000001")))
        await fake_slack.wait_ack(envelope)
        journaled_at_ack = await gateway.store.journal.seen("slack", "D0001:100.000001")
        [answer] = await fake_slack.wait_posts(1)
        await gateway.wait_idle()
    assert journaled_at_ack
    assert (answer.channel, answer.text, answer.thread_ts) == ("D0001", "echo: hello", None)
    assert fake_slack.connections == 1 and fake_slack.count("apps.connections.open") == 1


async def test_mention_in_a_channel_is_one_turn_though_two_events_arrive(
    fake_slack: FakeSlack, fake_llm: FakeLLM, slack_settings: Callable[..., Settings]
) -> None:
    settings = slack_settings(allow_from=["U42"], group_allow_from=["C0001"])
    mention = mention_event("what's up?", user="U42", ts="200.000001", user_profile=DANA)
    # With message.channels subscribed, Slack sends the same message as `message` too.
    as_message = {**mention, "type": "message", "channel_type": "channel"}
    chatter = {**as_message, "text": "no mention here", "ts": "200.000002"}
    async with running(settings) as (gateway, _):
        for event in (mention, as_message, chatter):
            await fake_slack.wait_ack(await fake_slack.push(event_body(event)))
        await fake_slack.wait_posts(1)
        await gateway.wait_idle()
    assert fake_slack.texts() == ["echo: [Dana] what's up?"]
    assert len(fake_llm.requests) == 1


async def test_a_thread_reply_stays_in_its_thread_as_its_own_session(
    fake_slack: FakeSlack, fake_llm: FakeLLM, slack_settings: Callable[..., Settings]
) -> None:
    settings = slack_settings(allow_from=["U42"], group_allow_from=["C0001"])
    async with running(settings) as (gateway, _):
        top = mention_event("in the channel", user="U42", ts="300.000001")
        await fake_slack.push(event_body(top))
        await fake_slack.wait_posts(1)
        reply = mention_event("in the thread", user="U42", ts="300.000005", thread_ts="300.000001")
        await fake_slack.push(event_body(reply))
        posts = await fake_slack.wait_posts(2)
        await gateway.wait_idle()
    assert [(p.text, p.thread_ts) for p in posts] == [
        ("echo: in the channel", None),
        ("echo: in the thread", "300.000001"),
    ]
    assert not any("in the channel" in t for t in fake_llm.requests[1].user_texts)


async def test_the_same_event_four_times_makes_one_turn(
    fake_slack: FakeSlack, fake_llm: FakeLLM, slack_settings: Callable[..., Settings]
) -> None:
    body = event_body(dm_event("once please", user="U42", ts="400.000001"), event_id="EvSAME")
    async with running(slack_settings(allow_from=["U42"])) as (gateway, _):
        envelopes = [await fake_slack.push(body, retry_attempt=n) for n in range(4)]
        for envelope in envelopes:
            await fake_slack.wait_ack(envelope)  # every delivery is acknowledged
        await fake_slack.wait_posts(1)
        await gateway.wait_idle()
    assert fake_slack.texts() == ["echo: once please"]
    assert len(fake_llm.requests) == 1


async def test_a_retry_whose_first_delivery_never_arrived_is_processed(
    fake_slack: FakeSlack, fake_llm: FakeLLM, slack_settings: Callable[..., Settings]
) -> None:
    body = event_body(dm_event("did you get this?", user="U42", ts="450.000001"))
    async with running(slack_settings(allow_from=["U42"])) as (gateway, _):
        await fake_slack.push(body, retry_attempt=2)
        await fake_slack.wait_posts(1)
        await gateway.wait_idle()
    assert fake_slack.texts() == ["echo: did you get this?"]


async def test_long_markdown_is_split_and_rendered_as_mrkdwn(
    fake_slack: FakeSlack, fake_llm: FakeLLM, slack_settings: Callable[..., Settings]
) -> None:
    answer = "**Summary** with a [link](https://example.org)\n\n" + "\n\n".join(
        f"Paragraph {i}: " + "words " * 60 for i in range(40)
    )
    fake_llm.queue(text(answer))
    async with running(slack_settings(allow_from=["U42"])) as (gateway, _):
        await fake_slack.push(event_body(dm_event("long please", user="U42", ts="500.000001")))
        await fake_slack.wait_posts(1)
        await gateway.wait_idle()
    posts = fake_slack.texts()
    assert len(posts) >= 3 and all(len(p) <= 4_000 for p in posts)
    assert posts[0].startswith("*Summary* with a <https://example.org|link>")
    assert all(f"Paragraph {i}:" in "".join(posts) for i in range(40))


async def test_a_429_holds_the_chat_then_delivers(
    fake_slack: FakeSlack, fake_llm: FakeLLM, slack_settings: Callable[..., Settings]
) -> None:
    fake_slack.fail_posts.append(("429", 0.3))
    async with running(slack_settings(allow_from=["U42"])) as (gateway, _):
        await fake_slack.push(event_body(dm_event("hello", user="U42", ts="600.000001")))
        await fake_slack.wait_posts(1)
        await gateway.wait_idle()
    assert fake_slack.texts() == ["echo: hello"]
    assert fake_slack.count("chat.postMessage") == 2  # refused once, then sent once


async def test_a_429_in_one_chat_holds_only_that_chat(
    fake_slack: FakeSlack, fake_llm: FakeLLM, slack_settings: Callable[..., Settings]
) -> None:
    fake_slack.limited["D0001"] = 30.0
    async with running(slack_settings(allow_from=["U42", "U43"])) as (gateway, _):
        await fake_slack.push(event_body(dm_event("hello", user="U42", ts="610.000001")))
        await fake_slack.until(lambda: fake_slack.count("chat.postMessage", "D0001") == 1)
        await fake_slack.push(
            event_body(dm_event("and me?", user="U43", ts="610.000002", channel="D0002"))
        )
        [answer] = await fake_slack.wait_posts(1)
        held = await gateway.store.outbox.chat_held("slack", "slack:D0001", time.time())
    assert (answer.channel, answer.text) == ("D0002", "echo: and me?")
    assert held and fake_slack.count("chat.postMessage", "D0001") == 1  # not retried at once


async def test_a_post_that_arrived_but_lost_its_answer_is_not_repeated(
    fake_slack: FakeSlack, fake_llm: FakeLLM, slack_settings: Callable[..., Settings]
) -> None:
    fake_slack.fail_posts.append(("disconnect", 0.0))
    async with running(slack_settings(allow_from=["U42"])) as (gateway, _):
        await fake_slack.push(event_body(dm_event("hello", user="U42", ts="650.000001")))
        await fake_slack.until(lambda: fake_slack.count("conversations.history") >= 1, timeout=10)
        await gateway.wait_idle()
    assert fake_slack.texts() == ["echo: hello"]
    assert fake_slack.count("chat.postMessage") == 1  # the SDK did not retry; neither did we


async def test_files_in_and_out(
    fake_slack: FakeSlack,
    fake_llm: FakeLLM,
    slack_settings: Callable[..., Settings],
    tmp_path: Path,
) -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"1" * 64
    shared = fake_slack.host_file("chart.png", png, "image/png")
    foreign = {**shared, "id": "FX", "url_private_download": "http://evil.example/steal"}
    event = dm_event(
        "look", user="U42", ts="700.000001", subtype="file_share", files=[shared, foreign]
    )
    settings = slack_settings(allow_from=["U42"])
    async with running(settings) as (gateway, channel):
        await fake_slack.push(event_body(event))
        await fake_slack.wait_posts(1)
        await gateway.wait_idle()
        report = tmp_path / "report.csv"
        report.write_text("a,b\n1,2\n")
        await channel.send(
            OutboundMessage(
                channel="slack",
                chat_id="D0001",
                text="",
                attachments=(Attachment(kind="document", path=str(report)),),
            )
        )
    stored = list((settings.workspace_dir / "attachments" / "slack").rglob("*.png"))
    assert [p.read_bytes() for p in stored] == [png]
    assert fake_slack.download_auth == [f"Bearer {BOT_TOKEN}"]  # never sent to another host
    prompt = fake_llm.requests[0].user_texts[-1]
    assert "not on Slack's file host" in prompt
    assert list(fake_slack.uploads.values()) == [("report.csv", b"a,b\n1,2\n")]
    assert fake_slack.posted[-1].files[0]["name"] == "report.csv"


async def test_reconnects_after_the_socket_drops(
    fake_slack: FakeSlack, fake_llm: FakeLLM, slack_settings: Callable[..., Settings]
) -> None:
    async with running(slack_settings(allow_from=["U42"])) as (gateway, channel):
        await fake_slack.drop()
        await fake_slack.until(lambda: fake_slack.connections == 2)
        await fake_slack.push(event_body(dm_event("back?", user="U42", ts="800.000001")))
        await fake_slack.wait_posts(1)
        await gateway.wait_idle()
        health = channel.health()
    assert fake_slack.texts() == ["echo: back?"]
    assert health.connected and fake_slack.count("apps.connections.open") == 2


async def test_unknown_sender_gets_one_pairing_code_and_no_model_call(
    fake_slack: FakeSlack, fake_llm: FakeLLM, slack_settings: Callable[..., Settings]
) -> None:
    async with running(slack_settings()) as (gateway, _):
        for ts in ("900.000001", "900.000002"):
            await fake_slack.push(event_body(dm_event("hi", user="U666", ts=ts)))
        [notice] = await fake_slack.wait_posts(1)
        await gateway.wait_idle()
    assert len(fake_slack.posted) == 1 and "pairing code" in notice.text
    assert fake_llm.requests == []


def test_slack_turns_on_with_credentials_and_names_what_is_missing(
    make_settings: Callable[..., Settings],
) -> None:
    assert not SlackSettings().enabled
    socket = SlackSettings(bot_token="xoxb-1", app_token="xapp-1")
    http = SlackSettings(bot_token="xoxb-1", signing_secret="s")
    assert (socket.enabled, socket.resolved_mode) == (True, "socket")
    assert (http.enabled, http.resolved_mode) == (True, "http")
    cases = [
        ({"bot_token": "xoxb-1"}, "slack.app_token", "SWITCHBOARD_SLACK__APP_TOKEN"),
        ({"app_token": "xapp-1"}, "slack.bot_token", "SWITCHBOARD_SLACK__BOT_TOKEN"),
        (
            {"bot_token": "xoxb-1", "app_token": "xapp-1", "mode": "http"},
            "slack.signing_secret",
            "SWITCHBOARD_SLACK__SIGNING_SECRET",
        ),
    ]
    for section, field, variable in cases:
        with pytest.raises(ConfigError, match=variable) as caught:
            make_settings(slack=section)
        assert caught.value.field == field
    assert channel_plugins()["slack"].settings is SlackSettings
    channels = build_channels(make_settings(slack={"bot_token": "xoxb-1", "app_token": "xapp-1"}))
    assert [c.name for c in channels] == ["slack"]


class NullSink:
    async def admits(self, msg: Any) -> bool:
        raise AssertionError("nothing should arrive")

    async def publish_inbound(self, msg: Any) -> Any:
        raise AssertionError("nothing should arrive")


async def test_rejected_tokens_fail_start_naming_the_setting(
    fake_slack: FakeSlack, slack_settings: Callable[..., Settings]
) -> None:
    for section, field in (
        ({"bot_token": "xoxb-revoked"}, "slack.bot_token"),
        ({"app_token": "xapp-revoked"}, "slack.app_token"),
    ):
        settings = slack_settings(**section)
        channel = SlackChannel(settings.slack, settings.channel_context())
        with pytest.raises(ConfigError) as caught:
            await channel.start(started(NullSink()))
        await channel.stop()
        assert caught.value.field == field
    assert fake_slack.connections == 0


def test_contract_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The documented variable names turn Discord and Slack on (issue 8's contract)."""
    from gateway.config.settings import load_settings

    env = {
        "SWITCHBOARD_DISCORD__TOKEN": "discord-token",
        "SWITCHBOARD_DISCORD__ALLOW_FROM": '["123456789012345678"]',
        "SWITCHBOARD_SLACK__BOT_TOKEN": "xoxb-1",
        "SWITCHBOARD_SLACK__APP_TOKEN": "xapp-1",
        "SWITCHBOARD_SLACK__SIGNING_SECRET": "secret",
        "SWITCHBOARD_SLACK__ALLOW_FROM": '["U012ABCDEF"]',
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    assert settings.discord.enabled and settings.discord.allow_from == ("123456789012345678",)
    assert settings.slack.enabled and settings.slack.allow_from == ("U012ABCDEF",)
    assert settings.slack.resolved_mode == "socket"  # an app token means Socket Mode
    monkeypatch.setenv("SWITCHBOARD_SLACK__MODE", "http")
    assert load_settings().slack.resolved_mode == "http"


# -- switchboard onboard --channel slack ---------------------------------------------------


async def test_onboard_checks_both_tokens_writes_to_the_owner_and_saves(
    tmp_path: Path, fake_slack: FakeSlack, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    home.mkdir()

    def onboard(bot_token: str) -> int:
        answers = [
            f"bot_token={bot_token}",
            f"app_token={APP_TOKEN}",
            f"base_url={fake_slack.api_url}",
            "allow_from=U0OWNER1",
        ]
        args = argparse.Namespace(channel="slack", set=answers, test_to=None, non_interactive=True)
        return onboard_channel(args, load_settings(home=home))

    # the command runs its own event loop, as from the command line: on a thread of its own
    wrong = await asyncio.to_thread(onboard, "xoxb-not-the-token")
    refused = capsys.readouterr().err
    done = await asyncio.to_thread(onboard, BOT_TOKEN)
    out = capsys.readouterr().out
    assert wrong == 1 and "refused the bot token (invalid_auth)" in refused
    assert done == 0 and "Socket Mode app token ok" in out
    [hello] = fake_slack.posted
    assert hello.channel == dm_of("U0OWNER1") and "Switchboard is set up" in hello.text
    saved = load_settings(home=home)
    assert saved.slack.owners == ("U0OWNER1",) and saved.slack.resolved_mode == "socket"
    secrets = (home / ".env").read_text()
    assert "SWITCHBOARD_SLACK__BOT_TOKEN" in secrets and "SWITCHBOARD_SLACK__APP_TOKEN" in secrets
