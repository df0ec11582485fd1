"""send_email is no open relay: members mail only allowlisted or their own addresses, and
everyone but the owner has a daily cap. Through the real gateway into aiosmtpd."""

from __future__ import annotations

import uuid
from typing import Any

from channels.memory import MemoryChannel
from gateway.config.settings import Settings
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, calls, text
from tests.fakes.mailservers import SmtpSink
from tests.test_email_send import email_settings

STRANGER = "stranger@elsewhere.test"
MEMBER_MAIL = "member@example.test"
ACCESS = {"owners": ["1"], "admins": ["2"], "allow_from": ["1", "2", "3"]}


def settings_for(make: SettingsFactory, sink: SmtpSink, **email: Any) -> Settings:
    mail = email_settings(sink, user_addresses={"telegram:3": MEMBER_MAIL}, **email)
    return make(telegram=ACCESS, email=mail)


async def ask_to_mail(
    settings: Settings, fake_llm: FakeLLM, senders: list[str], to: str
) -> list[str]:
    """Each sender asks for a mail to ``to``; the tool results, in order."""
    channel = MemoryChannel("telegram")
    results = []
    async with Gateway(settings, channels=[channel]) as gateway:
        for number, sender in enumerate(senders, start=1):
            fake_llm.queue(
                calls(("send_email", {"to": to, "subject": "Report", "body": "Numbers."})),
                text("Handled the email request."),
            )
            await channel.push(
                f"please email the report to {to}",
                sender_id=sender,
                chat_id=sender,
                message_id=uuid.uuid4().hex,
            )
            await channel.wait_for(number)
            await gateway.wait_idle()
            results.append(fake_llm.requests[-1].tool_results[-1])
    return results


async def test_a_member_cannot_mail_an_address_they_typed(
    make_settings: SettingsFactory, fake_llm: FakeLLM, sink: SmtpSink
) -> None:
    settings = settings_for(make_settings, sink)
    member, admin = await ask_to_mail(settings, fake_llm, ["3", "2"], STRANGER)
    assert "not an allowed recipient" in member and "email.typed_recipients" in member
    assert admin.startswith(f"Email sent to {STRANGER}")
    assert len(sink.received) == 1  # the admin's only


async def test_typed_recipients_can_be_opened_to_everyone(
    make_settings: SettingsFactory, fake_llm: FakeLLM, sink: SmtpSink
) -> None:
    settings = settings_for(make_settings, sink, typed_recipients="everyone")
    [member] = await ask_to_mail(settings, fake_llm, ["3"], STRANGER)
    assert member.startswith(f"Email sent to {STRANGER}")


async def test_each_person_has_a_daily_send_cap_the_owner_has_none(
    make_settings: SettingsFactory, fake_llm: FakeLLM, sink: SmtpSink
) -> None:
    settings = settings_for(make_settings, sink, max_sends_per_day=2)
    results = await ask_to_mail(settings, fake_llm, ["3", "3", "3", "1", "1", "1"], MEMBER_MAIL)
    assert [r.startswith("Email sent") for r in results] == [True, True, False, True, True, True]
    assert "max_sends_per_day = 2" in results[2]
    assert len(sink.received) == 5
