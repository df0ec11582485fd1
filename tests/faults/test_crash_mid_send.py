"""A gateway killed at the instant of a send, then started again: every answer shows once.

The fake platform holds a call open until the test has killed the ``switchboard run``
process (SIGKILL): having made the message (``sent, not recorded``) or not (``recorded, not
sent``), or a streamed draft's first post (``a draft without its id``). Each state is held
in a chat of its own at the same kill, so one restart settles all of them
(gateway/runtime/outbound/attempt.py, each platform's rule in docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from email.message import EmailMessage
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import channels.discord.adapter  # noqa: F401 - before discord.py: it quiets its audioop warning
from gateway.store import Store
from tests.fakes.holds import Hold
from tests.fakes.llm import FakeLLM, Recorded, Step, echo, streamed
from tests.fakes.mailservers import Dovecot, SmtpSink, dovecot  # noqa: F401 - fixture
from tests.fakes.signal_cli import FakeSignal
from tests.fakes.slack import APP_TOKEN, BOT_TOKEN, FakeSlack, dm_event, event_body, mention_event
from tests.fakes.telegram import FakeTelegram
from tests.fakes.whatsapp import (
    APP_SECRET,
    PHONE_NUMBER_ID,
    TOKEN,
    VERIFY_TOKEN,
    FakeGraph,
    body,
    message,
    post_signed,
)
from tests.nodes import cluster, telegram_env
from tests.test_cli import cli_env, switchboard

if TYPE_CHECKING:  # imported in the test, once channels.discord has loaded
    from tests.fakes.discord import FakeDiscord

pytestmark = pytest.mark.slow

SUPERGROUP = -1001234  # ids of its own: the held answer there arrives, unrecorded
BASIC_GROUP = -5  # the bot's counter, like private chats: the held answer never arrives
STREAMED = 42  # a private chat, streamed by editing: its draft's post is held
LONG = " ".join(f"word{i}" for i in range(60))
DANA = "dana@example.test"


@asynccontextmanager
async def gateway(
    env: dict[str, str], module: str = "gateway"
) -> AsyncIterator[asyncio.subprocess.Process]:
    """``switchboard run`` (``python -m <module> run``) until it says it is ready; SIGTERM
    at the end if still alive."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        "run",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(30):
            async for line in process.stdout:
                if line.decode().endswith("ready\n"):
                    break
        yield process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 30)


async def kill_when_held(process: asyncio.subprocess.Process, *holds: Hold) -> None:
    """Once every hold has its call (the instant of those sends), SIGKILL the gateway, then
    let the calls go (nobody reads their answers any more)."""
    async with asyncio.timeout(40):
        for held in holds:
            await held.arrived.wait()
    process.send_signal(signal.SIGKILL)
    await process.wait()
    for held in holds:
        held.release()


async def settled(home: Path, timeout: float = 30) -> None:
    """Wait until the gateway of ``home`` (another process) has nothing left to send."""
    async with Store(home / "data" / "switchboard.db") as store, asyncio.timeout(timeout):
        while await store.outbox.pending_count():  # noqa: ASYNC110 - another process's store
            await asyncio.sleep(0.1)


GROUPS = {
    "SWITCHBOARD_TELEGRAM__ALLOW_FROM": "42",  # who may talk in the groups
    "SWITCHBOARD_TELEGRAM__GROUP_ALLOW_FROM": f"{SUPERGROUP},{BASIC_GROUP}",
    "SWITCHBOARD_TELEGRAM__REQUIRE_MENTION": "false",
}


def letter(bot: str) -> EmailMessage:
    mail = EmailMessage()
    mail["From"], mail["To"], mail["Subject"] = f"Dana <{DANA}>", bot, "Calendar"
    mail["Message-ID"] = "<calendar@example.test>"
    mail.set_content("What's on my calendar?")
    return mail


def writes_slowly(request: Recorded) -> Step:
    """The streamed chat's answer takes a while to write; others are echoed."""
    if request.last_user_text == "tell me everything":
        return streamed(f"Here is **the answer**: {LONG}.", chunks=30, over=3.0)
    return echo(request)


@pytest.mark.timeout(120)
async def test_telegram_killed_at_the_send_instant_shows_every_answer_once(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    fake_llm.responder = writes_slowly
    home = tmp_path / "home"
    env = telegram_env(home, fake_llm, tg, **GROUPS)
    await switchboard("onboard", env=env)
    async with gateway(env) as first:
        for chat in range(100, 104):  # other private chats, answered: the bot's counter moves
            await tg.say(f"hello from {chat}", chat_id=chat, user_id=chat)
        await tg.wait_for(lambda: all(tg.visible(c) for c in range(100, 104)), 30)
        arrived = tg.hold("sendMessage", chat_id=SUPERGROUP, deliver=True)
        never = tg.hold("sendMessage", chat_id=BASIC_GROUP, deliver=False)
        draft = tg.hold("sendMessage", chat_id=STREAMED, deliver=True)
        await tg.say("status?", chat_id=SUPERGROUP, chat_type="supergroup")
        await tg.say("ping", chat_id=BASIC_GROUP, chat_type="group")
        await tg.say("tell me everything", chat_id=STREAMED)
        await kill_when_held(first, arrived, never, draft)
    assert tg.visible(SUPERGROUP) == ["echo: [Dana] status?"]  # there, but nobody recorded it
    assert tg.visible(BASIC_GROUP) == []
    assert len(tg.visible(STREAMED)) == 1  # the draft's first words

    async with gateway(env):
        await tg.wait_for(
            lambda: (  # the answer formatted: the draft's words are plain
                bool(tg.visible(BASIC_GROUP))
                and tg.visible(STREAMED) == [f"Here is the answer: {LONG}."]
            ),
            60,
        )
        await settled(home)
    assert tg.visible(SUPERGROUP) == ["echo: [Dana] status?"]
    assert len(tg.sent(SUPERGROUP)) == 1  # found, not sent again
    assert tg.visible(BASIC_GROUP) == ["echo: [Dana] ping"]
    assert tg.visible(STREAMED) == [f"Here is the answer: {LONG}."]  # the draft, finished
    for chat in range(100, 104):
        assert tg.visible(chat) == [f"echo: hello from {chat}"]


@pytest.mark.timeout(150)
async def test_a_cluster_leader_killed_at_the_send_instant_leaves_every_answer_once(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram, pg_url: str
) -> None:
    async with cluster(tmp_path, fake_llm, tg, pg_url, 3, **GROUPS) as nodes:
        leader, *standbys = nodes
        arrived = tg.hold("sendMessage", chat_id=SUPERGROUP, deliver=True)
        never = tg.hold("sendMessage", chat_id=BASIC_GROUP, deliver=False)
        dm = tg.hold("sendMessage", chat_id=STREAMED, deliver=True)  # no streaming on PostgreSQL
        await tg.say("status?", chat_id=SUPERGROUP, chat_type="supergroup")
        await tg.say("ping", chat_id=BASIC_GROUP, chat_type="group")
        await tg.say("hello", chat_id=STREAMED)
        await kill_when_held(leader.process, arrived, never, dm)
        async with asyncio.timeout(40):  # another node leads and settles the three sends
            await asyncio.wait(
                [asyncio.create_task(n.ready.wait()) for n in standbys],
                return_when=asyncio.FIRST_COMPLETED,
            )
            await tg.wait_for(lambda: bool(tg.visible(BASIC_GROUP)), 40)
        # the next answers in those chats come after them, once each
        for chat, kind in (
            (SUPERGROUP, "supergroup"),
            (BASIC_GROUP, "group"),
            (STREAMED, "private"),
        ):
            await tg.say("and now?", chat_id=chat, chat_type=kind)
        await tg.wait_for(
            lambda: all(len(tg.visible(c)) >= 2 for c in (SUPERGROUP, BASIC_GROUP, STREAMED)), 40
        )
    assert tg.visible(SUPERGROUP) == ["echo: [Dana] status?", "echo: [Dana] and now?"]
    assert tg.visible(BASIC_GROUP) == ["echo: [Dana] ping", "echo: [Dana] and now?"]
    assert tg.visible(STREAMED) == ["echo: hello", "echo: and now?"]
    assert len(tg.sent()) == 6  # the two that arrived unrecorded were found, not sent again


# -- Discord ---------------------------------------------------------------------------------


@pytest.mark.timeout(120)
async def test_discord_killed_at_the_send_instant_shows_every_answer_once(
    tmp_path: Path, fake_llm: FakeLLM, fake_discord: FakeDiscord
) -> None:
    from tests.fakes.discord import OTHER_CHANNEL, TEXT_CHANNEL, dm_channel, user

    owner = user(42, "dana", "Dana")
    fake_llm.responder = writes_slowly
    home = tmp_path / "home"
    env = cli_env(
        home,
        fake_llm,
        FAKE_DISCORD_URL=fake_discord.base,
        SWITCHBOARD_WEB__ENABLED="false",
        SWITCHBOARD_DISCORD__TOKEN="test-token",
        SWITCHBOARD_DISCORD__ALLOW_FROM="42",
        SWITCHBOARD_DISCORD__GROUP_ALLOW_FROM=f"{TEXT_CHANNEL},{OTHER_CHANNEL}",
        SWITCHBOARD_DISCORD__REQUIRE_MENTION="false",
        SWITCHBOARD_AGENT__REFLECTION="false",
    )
    dm = dm_channel(owner)
    await switchboard("onboard", env=env)
    async with gateway(env, "tests.fakes.discord_run") as first:
        arrived = fake_discord.hold_post(TEXT_CHANNEL, deliver=True)
        never = fake_discord.hold_post(OTHER_CHANNEL, deliver=False)
        draft = fake_discord.hold_post(dm, deliver=True)  # DMs stream: its first post
        for channel in (TEXT_CHANNEL, OTHER_CHANNEL):
            await fake_discord.message("status?", author=owner, channel_id=channel, guild=True)
        await fake_discord.dm("tell me everything", author=owner)
        await kill_when_held(first, arrived, never, draft)
    [answer] = fake_discord.visible(TEXT_CHANNEL)  # there, but nobody recorded it
    assert fake_discord.visible(OTHER_CHANNEL) == []

    async with gateway(env, "tests.fakes.discord_run"):
        await fake_discord.until(
            lambda: (
                bool(fake_discord.visible(OTHER_CHANNEL))
                and fake_discord.visible(dm) == [f"Here is **the answer**: {LONG}."]
            ),
            60,
        )
        await settled(home)
    assert fake_discord.visible(TEXT_CHANNEL) == [answer]
    assert fake_discord.texts(TEXT_CHANNEL) == [answer]  # read back, not posted again
    assert fake_discord.visible(OTHER_CHANNEL) == [answer]
    assert fake_discord.visible(dm) == [f"Here is **the answer**: {LONG}."]


# -- Slack -----------------------------------------------------------------------------------


@pytest.mark.timeout(120)
async def test_slack_killed_at_the_send_instant_shows_every_answer_once(
    tmp_path: Path, fake_llm: FakeLLM, fake_slack: FakeSlack
) -> None:
    fake_llm.responder = writes_slowly
    home = tmp_path / "home"
    env = cli_env(
        home,
        fake_llm,
        SWITCHBOARD_WEB__ENABLED="false",
        SWITCHBOARD_SLACK__BOT_TOKEN=BOT_TOKEN,
        SWITCHBOARD_SLACK__APP_TOKEN=APP_TOKEN,
        SWITCHBOARD_SLACK__BASE_URL=fake_slack.api_url,
        SWITCHBOARD_SLACK__ALLOW_FROM="U42",
        SWITCHBOARD_SLACK__GROUP_ALLOW_FROM="C0001,C0002",
        SWITCHBOARD_AGENT__REFLECTION="false",
    )
    await switchboard("onboard", env=env)
    async with gateway(env) as first:
        arrived = fake_slack.hold_post("C0001", deliver=True)
        never = fake_slack.hold_post("C0002", deliver=False)
        draft = fake_slack.hold_post("D0042", deliver=True)  # DMs stream: its first post
        for n, channel in enumerate(("C0001", "C0002")):
            event = mention_event("status?", user="U42", ts=f"900.00000{n}", channel=channel)
            await fake_slack.push(event_body(event))
        dm = dm_event("tell me everything", user="U42", ts="901.000001", channel="D0042")
        await fake_slack.push(event_body(dm))
        await kill_when_held(first, arrived, never, draft)
    [answer] = fake_slack.visible("C0001")  # there, but nobody recorded it
    assert fake_slack.visible("C0002") == []

    async with gateway(env):
        await fake_slack.until(
            lambda: (
                bool(fake_slack.visible("C0002"))
                and fake_slack.visible("D0042") == [f"Here is *the answer*: {LONG}."]
            ),
            60,
        )
        await settled(home)
    assert fake_slack.visible("C0001") == [answer]
    assert fake_slack.count("chat.postMessage", "C0001") == 1  # read back, not posted again
    assert fake_slack.visible("C0002") == [answer]
    assert fake_slack.visible("D0042") == [f"Here is *the answer*: {LONG}."]


# -- email -----------------------------------------------------------------------------------


@pytest.mark.timeout(120)
async def test_email_killed_at_the_send_instant_is_found_in_the_sent_folder(
    tmp_path: Path,
    fake_llm: FakeLLM,
    sink: SmtpSink,
    dovecot: Dovecot,  # noqa: F811 - the imported fixture
) -> None:
    bot = dovecot.add_user("bot")

    async def files_what_it_sent(raw: bytes) -> None:  # as Gmail's SMTP server does
        await dovecot.file(bot, "Sent", raw)

    sink.on_accepted = files_what_it_sent
    home = tmp_path / "home"
    env = cli_env(
        home,
        fake_llm,
        SWITCHBOARD_WEB__ENABLED="false",
        SWITCHBOARD_EMAIL__IMAP_HOST="127.0.0.1",
        SWITCHBOARD_EMAIL__IMAP_PORT=str(dovecot.imap_port),
        SWITCHBOARD_EMAIL__IMAP_USERNAME=bot,
        SWITCHBOARD_EMAIL__IMAP_PASSWORD=dovecot.password,
        SWITCHBOARD_EMAIL__IMAP_TLS="false",
        SWITCHBOARD_EMAIL__POLL_INTERVAL_SECONDS="0.2",
        SWITCHBOARD_EMAIL__SMTP_HOST="127.0.0.1",
        SWITCHBOARD_EMAIL__SMTP_PORT=str(sink.port),
        SWITCHBOARD_EMAIL__SMTP_STARTTLS="false",
        SWITCHBOARD_EMAIL__FROM_ADDRESS=bot,
        SWITCHBOARD_EMAIL__ALLOW_FROM=DANA,
        SWITCHBOARD_EMAIL__SENT_FOLDER="Sent",
        SWITCHBOARD_EMAIL__APPEND_SENT="false",  # the server files them
        SWITCHBOARD_AGENT__REFLECTION="false",
    )
    await switchboard("onboard", env=env)
    async with gateway(env) as first:
        held = sink.hold(deliver=True)
        await dovecot.deliver(letter(bot), bot)
        await kill_when_held(first, held)
    [reply] = sink.received  # accepted and filed; the gateway never heard so

    async with gateway(env):
        await settled(home)
    assert sink.received == [reply]  # found in the sent folder: not sent again
    assert reply["In-Reply-To"] == "<calendar@example.test>"


# -- WhatsApp --------------------------------------------------------------------------------


def free_port() -> int:
    """A port for a gateway that must be found at the same address after its restart."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.timeout(120)
async def test_whatsapp_killed_at_the_send_instant_is_found_by_metas_report(
    tmp_path: Path, fake_llm: FakeLLM, graph: FakeGraph
) -> None:
    """Meta took one answer (its ``sent`` report, tagged with the outbox part, reaches the
    gateway only after the restart) and never got the other: the first is not sent again,
    the second is sent once the wait for its report is over."""
    arrived_to, never_to = "4915100000001", "4915100000002"
    home = tmp_path / "home"
    port = free_port()
    url = f"http://127.0.0.1:{port}/whatsapp/webhook"
    env = cli_env(
        home,
        fake_llm,
        SWITCHBOARD_WEB__PORT=str(port),
        SWITCHBOARD_WHATSAPP__ACCESS_TOKEN=TOKEN,
        SWITCHBOARD_WHATSAPP__PHONE_NUMBER_ID=PHONE_NUMBER_ID,
        SWITCHBOARD_WHATSAPP__APP_SECRET=APP_SECRET,
        SWITCHBOARD_WHATSAPP__VERIFY_TOKEN=VERIFY_TOKEN,
        SWITCHBOARD_WHATSAPP__BASE_URL=graph.base_url,
        SWITCHBOARD_WHATSAPP__ALLOW_FROM=f"{arrived_to},{never_to}",
        SWITCHBOARD_WHATSAPP__RESEND_WAIT_SECONDS="10",
        SWITCHBOARD_AGENT__REFLECTION="false",
    )
    graph.webhook_url = url
    await switchboard("onboard", env=env)
    async with gateway(env) as first:
        graph.reports_open.clear()  # Meta's reports of what it takes now come late
        arrived = graph.hold_send(arrived_to, deliver=True)
        never = graph.hold_send(never_to, deliver=False)
        for sender in (arrived_to, never_to):
            response = await post_signed(url, body(message(sender, text="status?")))
            assert response.status == 200
        await kill_when_held(first, arrived, never)
    assert graph.visible(arrived_to) == ["echo: status?"]  # there, but nobody recorded it
    assert graph.visible(never_to) == []

    async with gateway(env):
        graph.reports_open.set()  # Meta tries again: the report reaches the new process
        await graph.wait_for(lambda: bool(graph.visible(never_to)), 30)
        await settled(home)
    assert graph.visible(arrived_to) == ["echo: status?"]  # found by its report: not resent
    assert graph.visible(never_to) == ["echo: status?"]  # no report: sent once, after the wait


# -- Signal ----------------------------------------------------------------------------------


@pytest.mark.timeout(120)
async def test_signal_killed_at_the_send_instant_is_settled_by_delivery_receipts(
    tmp_path: Path, fake_llm: FakeLLM, signal_daemon: FakeSignal
) -> None:
    """signal-cli made one answer (its recipient's phone acknowledged it while the gateway
    was dead; the daemon kept that event) and never made the other: after the restart the
    first is found by its receipt and not sent again, the second is sent once after the wait."""
    arrived_to, never_to = "+4915100000001", "+4915100000002"
    for number in (arrived_to, never_to):
        signal_daemon.person(number)
    home = tmp_path / "home"
    env = cli_env(
        home,
        fake_llm,
        SWITCHBOARD_WEB__ENABLED="false",
        SWITCHBOARD_SIGNAL__RPC_URL=signal_daemon.url,
        SWITCHBOARD_SIGNAL__ACCOUNT=signal_daemon.account,
        SWITCHBOARD_SIGNAL__ALLOW_FROM=f"{arrived_to},{never_to}",
        SWITCHBOARD_SIGNAL__RESEND_WAIT_SECONDS="5",
        SWITCHBOARD_AGENT__REFLECTION="false",
    )
    await switchboard("onboard", env=env)
    async with gateway(env) as first:
        await signal_daemon.wait_for(lambda: signal_daemon.connections == 1)
        arrived = signal_daemon.hold_send(arrived_to, deliver=True)
        never = signal_daemon.hold_send(never_to, deliver=False)
        for sender in (arrived_to, never_to):
            await signal_daemon.say(sender, "status?")
        await kill_when_held(first, arrived, never)
    assert signal_daemon.shown(arrived_to) == ["echo: status?"]  # there, nobody recorded it
    assert signal_daemon.shown(never_to) == []

    async with gateway(env):
        await signal_daemon.wait_for(lambda: bool(signal_daemon.shown(never_to)), 30)
        await settled(home)
    assert signal_daemon.shown(arrived_to) == ["echo: status?"]  # found by its receipt
    assert signal_daemon.shown(never_to) == ["echo: status?"]  # no receipt: sent once, later


# -- one person across channels ---------------------------------------------------------------


@pytest.mark.timeout(120)
async def test_killed_between_a_telegram_turns_commit_and_its_send_then_slack_each_answer_once(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram, fake_slack: FakeSlack
) -> None:
    """Ann's Telegram and Slack are one conversation (session.scope = "person"): the
    Telegram answer, committed but not sent when the gateway dies, is sent once after the
    restart, and her Slack message then continues that conversation, answered on Slack
    once."""
    home = tmp_path / "home"
    env = telegram_env(
        home,
        fake_llm,
        tg,
        SWITCHBOARD_SLACK__BOT_TOKEN=BOT_TOKEN,
        SWITCHBOARD_SLACK__APP_TOKEN=APP_TOKEN,
        SWITCHBOARD_SLACK__BASE_URL=fake_slack.api_url,
        SWITCHBOARD_SLACK__ALLOW_FROM="U0ANN",
        SWITCHBOARD_SLACK__STREAMING="false",
        SWITCHBOARD_PEOPLE='{"ann": {"ids": ["telegram:111", "slack:U0ANN"]}}',
        SWITCHBOARD_SESSION__SCOPE="person",
    )
    await switchboard("onboard", env=env)
    async with gateway(env) as first:
        never = tg.hold("sendMessage", chat_id=111, deliver=False)  # committed, not sent
        await tg.say("my locker code is 4521", chat_id=111, user_id=111)
        await kill_when_held(first, never)
    assert tg.visible(111) == []

    async with gateway(env):
        dm = dm_event("what is my locker code?", user="U0ANN", ts="950.000001", channel="D0ANN")
        await fake_slack.push(event_body(dm))
        await fake_slack.until(lambda: bool(fake_slack.visible("D0ANN")), 60)
        await tg.wait_for(lambda: bool(tg.visible(111)), 30)
        await settled(home)
    asked = fake_llm.requests[-1]
    assert tg.visible(111) == ["echo: my locker code is 4521"]
    assert len(tg.sent(111)) == 1
    assert fake_slack.visible("D0ANN") == ["echo: what is my locker code?"]
    assert fake_slack.count("chat.postMessage", "D0ANN") == 1
    # the Slack turn continued the conversation in order: Telegram's message and its
    # answer, then the Slack question
    said = [m["role"] for m in asked.body["messages"] if m["role"] != "system"]
    assert asked.user_texts == ["my locker code is 4521", "what is my locker code?"]
    assert said == ["user", "assistant", "user"]
    assert len(fake_llm.requests) == 2  # the committed turn did not run again
