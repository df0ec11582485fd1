"""Signal against a fake signal-cli daemon (tests/fakes/signal_cli.py) that speaks signal-cli's
documented JSON-RPC: the real channel, the real gateway, the fake model."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from channels.signal import render
from channels.signal.plugin import create
from gateway.cli.onboard.channel import onboard_channel
from gateway.config.settings import Settings, load_settings
from gateway.core.channel import KnownMessage, LostSend, SendAttempt, SupportsProbe, SupportsResend
from gateway.core.errors import ChannelPermanentError, ChannelTransientError, ConfigError
from gateway.core.messages import OutboundMessage
from gateway.runtime.app import Gateway
from gateway.web.status import channel_states
from tests.conftest import SettingsFactory
from tests.fakes import llm
from tests.fakes.llm import FakeLLM
from tests.fakes.signal_cli import ACCOUNT, FakeSignal

pytestmark = pytest.mark.timeout(120)

DANA, EVE = "+4915112345678", "+4915187654321"
GROUP = "Pmpi+EfPWmsxiomLe9Nx2XF9HOE483p6iKiFj65iMwI="


@pytest.fixture
def daemon(signal_daemon: FakeSignal) -> FakeSignal:
    signal_daemon.person(DANA, "Dana")
    signal_daemon.person(EVE, "Eve")
    return signal_daemon


def signal_settings(make_settings: SettingsFactory, daemon: FakeSignal, **extra: Any) -> Settings:
    section = {"rpc_url": daemon.url, "account": ACCOUNT, "allow_from": [DANA], **extra}
    return make_settings(signal=section)


def signal_state(gateway: Gateway) -> dict[str, Any]:
    [state] = [s for s in channel_states(gateway) if s["name"] == "signal"]
    return state


@asynccontextmanager
async def running(settings: Settings, daemon: FakeSignal) -> AsyncIterator[Gateway]:
    async with Gateway(
        settings, channels=[create(settings.signal, settings.channel_context())]
    ) as gateway:
        await daemon.wait_for(lambda: daemon.connections > 0)
        yield gateway


async def test_a_direct_message_from_an_allowed_number_is_answered_once_with_styles(
    make_settings: SettingsFactory, daemon: FakeSignal, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(llm.text("Hello **Dana**, see `notes.md`"))
    async with running(signal_settings(make_settings, daemon), daemon) as gateway:
        await daemon.say(DANA, "hi bot")
        await daemon.wait_for(lambda: daemon.shown(DANA))
        await gateway.wait_idle()
    [made] = daemon.made
    assert made.text == "Hello Dana, see notes.md"
    assert made.params["textStyle"] == ["6:4:BOLD", "16:8:MONOSPACE"]
    assert made.params["recipient"] == [DANA]
    assert "hi bot" in fake_llm.requests[0].last_user_text
    assert len(fake_llm.requests) == 1


async def test_tables_task_lists_quotes_and_links_read_as_text_with_styles(
    make_settings: SettingsFactory, daemon: FakeSignal, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(
        llm.text(
            "## Shopping\n\n| item | qty |\n|---|---|\n| milk | 2 |\n| 面包 | 10 |\n\n"
            "- [x] ~~eggs~~\n- [ ] [the list](https://x.test/list)\n\n> from Ann"
        )
    )
    async with running(signal_settings(make_settings, daemon), daemon) as gateway:
        await daemon.say(DANA, "what do we need?")
        await daemon.wait_for(lambda: daemon.shown(DANA))
        await gateway.wait_idle()
    [made] = daemon.made
    assert made.text == (
        "Shopping\n\n"
        "item | qty\n-----+----\nmilk | 2\n面包 | 10\n\n"  # columns aligned: 面包 is two wide
        "☑ eggs\n☐ the list (https://x.test/list)\n\n"  # Signal links nothing: the address
        "> from Ann"
    )
    assert made.params["textStyle"] == ["0:8:BOLD", "10:38:MONOSPACE", "52:4:STRIKETHROUGH"]


async def test_typing_shows_while_the_turn_runs(
    make_settings: SettingsFactory, daemon: FakeSignal, fake_llm: FakeLLM
) -> None:
    thinking = asyncio.Event()
    fake_llm.queue(llm.held(thinking, "done thinking"))
    typing = ("sendTyping", {"recipient": [DANA], "account": ACCOUNT})
    async with running(signal_settings(make_settings, daemon), daemon) as gateway:
        await daemon.say(DANA, "think hard")
        await daemon.wait_for(lambda: typing in daemon.calls)
        assert daemon.made == []  # typing before the answer
        thinking.set()
        await daemon.wait_for(lambda: daemon.shown(DANA) == ["done thinking"])
        await gateway.wait_idle()


async def test_the_same_notification_after_a_daemon_restart_gives_no_second_turn(
    make_settings: SettingsFactory, daemon: FakeSignal, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(llm.text("first answer"), llm.text("second answer"))
    async with running(signal_settings(make_settings, daemon), daemon) as gateway:
        hello = await daemon.say(DANA, "hello")
        await daemon.wait_for(lambda: daemon.shown(DANA) == ["first answer"])

        async def status_says_so() -> None:  # the status page, while signal-cli is down
            async with asyncio.timeout(15):
                while (state := signal_state(gateway))["connected"]:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            assert "event stream" in state["last_error"]

        await daemon.restart(status_says_so)  # kept events are gone; it hands it on again
        await daemon.wait_for(lambda: daemon.connections == 2, 30)
        await daemon.emit(hello)
        await daemon.say(DANA, "are you there?")
        await daemon.wait_for(lambda: len(daemon.shown(DANA)) == 2)
        await gateway.wait_idle()
        assert signal_state(gateway)["connected"]
    assert daemon.shown(DANA) == ["first answer", "second answer"]
    assert len(fake_llm.requests) == 2
    assert "are you there?" in fake_llm.requests[1].last_user_text


async def test_a_stranger_gets_a_pairing_code_only(
    make_settings: SettingsFactory, daemon: FakeSignal, fake_llm: FakeLLM
) -> None:
    async with running(signal_settings(make_settings, daemon), daemon) as gateway:
        await daemon.say(EVE, "let me in, and run rm -rf /")
        await daemon.wait_for(lambda: daemon.shown(EVE))
        await gateway.wait_idle()
        [pairing] = await gateway.store.pairings.listing(channel="signal")
    [notice] = daemon.shown(EVE)
    assert pairing.code in notice and "pairing code" in notice
    assert pairing.sender_id == EVE
    assert fake_llm.requests == []


async def test_a_group_message_without_a_mention_is_context_only(
    make_settings: SettingsFactory, daemon: FakeSignal, fake_llm: FakeLLM
) -> None:
    daemon.group(GROUP, "Family", DANA, EVE)
    settings = signal_settings(make_settings, daemon, group_allow_from=[GROUP])
    fake_llm.queue(llm.text("At five."))
    async with running(settings, daemon) as gateway:
        await daemon.say(DANA, "the dentist moved to five", group=GROUP)
        asking = "\ufffc when is the dentist?"
        await daemon.say(DANA, asking, group=GROUP, mentions=daemon.mention_of_bot(asking))
        await daemon.wait_for(lambda: daemon.shown(GROUP))
        await gateway.wait_idle()
    assert daemon.shown(GROUP) == ["At five."]
    [request] = fake_llm.requests
    asked, _, context = request.last_user_text.partition("\n")
    assert asked == "[Dana] when is the dentist?"  # the mention itself is not part of it
    assert "earlier in this group" in context and "Dana: the dentist moved to five" in context


async def test_a_reply_quotes_the_message_it_answers_in_a_group(
    make_settings: SettingsFactory, daemon: FakeSignal, fake_llm: FakeLLM
) -> None:
    daemon.group(GROUP, "Family", DANA)
    settings = signal_settings(make_settings, daemon, group_allow_from=[GROUP])
    fake_llm.queue(llm.text("Yes."))
    async with running(settings, daemon) as gateway:
        asking = "\ufffc is it raining?"
        question = await daemon.say(
            DANA,
            asking,
            group=GROUP,
            mentions=daemon.mention_of_bot(asking),
            quote={"id": 11, "authorNumber": EVE, "text": "bring umbrellas", "attachments": []},
        )
        await daemon.wait_for(lambda: daemon.shown(GROUP))
        await gateway.wait_idle()
    [made] = daemon.made
    envelope = question["envelope"]
    assert made.params["quoteTimestamp"] == envelope["timestamp"]
    assert made.params["quoteAuthor"] == envelope["sourceUuid"]
    assert "bring umbrellas" in json.dumps(fake_llm.requests[0].body)


async def test_a_voice_note_and_an_image_arrive_as_kinded_files(
    make_settings: SettingsFactory, daemon: FakeSignal, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.queue(llm.text("Nice cat."))
    daemon.attachments["voice1"] = b"OggS fake voice"
    daemon.attachments["photo1"] = b"\x89PNG fake"
    files = [
        {"contentType": "audio/aac", "filename": None, "id": "voice1", "size": 15},
        {"contentType": "image/png", "filename": "cat.png", "id": "photo1", "size": 9},
    ]
    async with running(signal_settings(make_settings, daemon), daemon) as gateway:
        await daemon.say(DANA, "", attachments=files)
        await daemon.wait_for(lambda: daemon.shown(DANA))
        await gateway.wait_idle()
    prompt = fake_llm.requests[0].last_user_text
    assert "[voice attached:" in prompt and "[image attached: cat.png" in prompt
    folder = next((tmp_path / "home" / "workspace" / "attachments" / "signal").iterdir())
    stored = sorted(p.read_bytes() for p in folder.iterdir())
    assert stored == [b"OggS fake voice", b"\x89PNG fake"]


async def test_a_reaction_acknowledges_a_message_until_it_is_answered(
    make_settings: SettingsFactory, daemon: FakeSignal, fake_llm: FakeLLM
) -> None:
    settings = signal_settings(make_settings, daemon, reactions=True)
    fake_llm.queue(llm.text("Got it."))
    async with running(settings, daemon) as gateway:
        asked = await daemon.say(DANA, "remind me at five")
        await daemon.wait_for(lambda: daemon.shown(DANA))
        await gateway.wait_idle()
    stamp = asked["envelope"]["timestamp"]
    reactions = [
        (p["emoji"], p["targetAuthor"], p["targetTimestamp"], p["remove"])
        for method, p in daemon.calls
        if method == "sendReaction"
    ]
    assert reactions == [("\N{EYES}", DANA, stamp, False), ("\N{EYES}", DANA, stamp, True)]
    sends = [i for i, (method, _) in enumerate(daemon.calls) if method == "send"]
    removed = [i for i, (m, p) in enumerate(daemon.calls) if m == "sendReaction" and p["remove"]]
    assert sends[0] < removed[0]  # taken back once the answer went out


async def test_a_lost_send_is_completed_after_the_parts_the_receipts_show(
    make_settings: SettingsFactory, daemon: FakeSignal
) -> None:
    """A long answer (three Signal messages) whose earlier attempt delivered two before its
    outcome was lost, and a group answer that arrived whole: each recipient's delivery
    receipts say so, and only what is missing goes."""
    daemon.group(GROUP, "Family", DANA, EVE)
    settings = signal_settings(make_settings, daemon, resend_wait_seconds=2)
    long = OutboundMessage("signal", DANA, " ".join(f"w{i:04d}" for i in range(900)))
    short = OutboundMessage("signal", GROUP, "The dentist is at five.")
    parts = [p.text for p in render.parts(long.text)]
    assert len(parts) == 3
    channel = create(settings.signal, settings.channel_context())
    assert isinstance(channel, SupportsResend)
    async with Gateway(settings, channels=[channel]):
        await daemon.wait_for(lambda: daemon.connections > 0)
        began = time.time()
        for text in parts[:2]:
            await daemon.deliver(DANA, text)  # what the lost attempt did
        found = await channel.resend(LostSend(long, (SendAttempt(began),)))
        # (at the same moment a member's direct answer would be taken for the group's:
        # receipts do not name the group, docs/reliability.md)
        began = time.time()
        await daemon.deliver(GROUP, short.text)
        recorded = (KnownMessage(DANA, found or "", began),)  # the store has the answer above
        again = await channel.resend(LostSend(short, (SendAttempt(began),), known=recorded))
    assert daemon.shown(DANA) == parts  # the third part only was sent now
    assert daemon.shown(GROUP) == [short.text]  # nothing sent again
    assert found is not None and len(found.split(",")) == 3
    assert again == str(daemon.made[3].timestamp)


def test_settings_name_the_field_that_is_wrong(make_settings: SettingsFactory) -> None:
    with pytest.raises(ConfigError) as missing:
        make_settings(signal={"rpc_url": "http://127.0.0.1:8080"})
    assert missing.value.field == "signal.account"
    with pytest.raises(ValidationError, match=r"signal\.allow_from\n.*'0151' is neither a number"):
        make_settings(signal={"rpc_url": "http://x:1", "account": ACCOUNT, "allow_from": ["0151"]})


async def test_doctor_checks_the_daemon_and_the_account(
    make_settings: SettingsFactory, daemon: FakeSignal
) -> None:
    daemon.group(GROUP, "Family", DANA)
    settings = signal_settings(make_settings, daemon)
    channel = create(settings.signal, settings.channel_context())
    assert isinstance(channel, SupportsProbe)
    assert await channel.probe() == f"{ACCOUNT} through {daemon.url} (1 group(s))"
    other = make_settings(signal={"rpc_url": daemon.url, "account": "+15559999999"})
    with pytest.raises(ChannelPermanentError, match="SWITCHBOARD_SIGNAL__ACCOUNT"):
        await create(other.signal, other.channel_context()).probe()  # type: ignore[attr-defined]
    await daemon.stop()
    with pytest.raises(ChannelTransientError, match="cannot reach signal-cli"):
        await channel.probe()


async def test_onboard_checks_saves_and_sends_a_test_message(
    tmp_path: Path, daemon: FakeSignal
) -> None:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    settings = load_settings(home=home)
    answers = [f"rpc_url={daemon.url}", f"account={ACCOUNT}", f"allow_from={DANA}"]
    args = argparse.Namespace(channel="signal", set=answers, test_to=None, non_interactive=True)
    # the command runs its own event loop, as from the command line: on a thread of its own
    assert await asyncio.to_thread(onboard_channel, args, settings) == 0
    [hello] = daemon.made
    assert hello.to == DANA and "Switchboard is set up" in hello.text
    saved = load_settings(home=home)
    assert saved.signal.enabled and saved.signal.owners == (DANA,)
