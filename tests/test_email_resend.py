"""Email: a reply whose send was cut short is not sent twice where the sent folder shows it
went out, and otherwise goes again with the same Message-ID (mail clients show it once).
Real Dovecot (the sent folder over IMAP) and aiosmtpd; each "restart" is a fresh channel
with a state file of its own, as a crash before the state was saved leaves it.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from channels.email.adapter import EmailChannel
from gateway.core.channel import LostSend, SendAttempt
from gateway.core.errors import ConfigError
from gateway.core.messages import OutboundMessage
from tests.conftest import SettingsFactory
from tests.fakes.mailservers import (  # noqa: F401 - fixture
    Dovecot,
    SmtpSink,
    dovecot,
)
from tests.test_email_inbox import DANA, inbox

REPLY = OutboundMessage("email", DANA, "Your calendar is free.", idempotency_key="outbox-row-7")


@pytest.fixture
def bot(dovecot: Dovecot) -> str:  # noqa: F811 - the imported fixture
    return dovecot.add_user("bot")


def process(
    make_settings: SettingsFactory, tmp_path: Path, name: str, **email: Any
) -> EmailChannel:
    """The email channel of one gateway process, with a data directory of its own."""
    settings = make_settings(email=email)
    return EmailChannel(
        settings.email, replace(settings.channel_context(), data_dir=tmp_path / name)
    )


def lost() -> LostSend:
    return LostSend(REPLY, (SendAttempt(time.time() - 5),))


async def test_a_reply_the_sent_folder_holds_is_not_sent_again(
    make_settings: SettingsFactory,
    dovecot: Dovecot,  # noqa: F811
    bot: str,
    sink: SmtpSink,
    tmp_path: Path,
) -> None:
    section = inbox(dovecot, bot, sink, sent_folder="Sent")
    first = process(make_settings, tmp_path, "first", **section)
    message_id = await first.send(REPLY)  # sent and filed; the process dies before the outbox knew
    async with dovecot.mailbox(bot, "Sent") as sent:
        [filed] = await sent.count(1)
    assert filed["Message-ID"] == message_id

    again = await process(make_settings, tmp_path, "second", **section).resend(lost())

    assert again == message_id
    assert len(sink.received) == 1  # found in the sent folder: not sent again


async def test_without_a_sent_folder_the_reply_goes_again_with_the_same_message_id(
    make_settings: SettingsFactory,
    dovecot: Dovecot,  # noqa: F811
    bot: str,
    sink: SmtpSink,
    tmp_path: Path,
) -> None:
    section = inbox(dovecot, bot, sink)
    await process(make_settings, tmp_path, "first", **section).send(REPLY)

    await process(make_settings, tmp_path, "second", **section).resend(lost())

    first, second = sink.received
    assert first["Message-ID"] == second["Message-ID"]  # one message to the mail client


async def test_a_reply_not_in_the_sent_folder_is_sent(
    make_settings: SettingsFactory,
    dovecot: Dovecot,  # noqa: F811
    bot: str,
    sink: SmtpSink,
    tmp_path: Path,
) -> None:
    section = inbox(dovecot, bot, sink, sent_folder="Sent")

    await process(make_settings, tmp_path, "restarted", **section).resend(lost())

    assert [m["Subject"] for m in sink.received] == ["Your calendar is free."]


def test_a_sent_folder_without_imap_is_a_config_error(make_settings: SettingsFactory) -> None:
    with pytest.raises(ConfigError) as refused:
        make_settings(email={"smtp_host": "127.0.0.1", "sent_folder": "Sent"})
    assert refused.value.field == "email.sent_folder"
