"""Email attachments are understood like any channel's: a PDF is read and an audio file is
transcribed, through a real IMAP server (Dovecot) and the fake speech server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from channels import build_channels
from gateway.runtime.app import Gateway
from tests import documents
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM
from tests.fakes.mailservers import (  # noqa: F401 - fixture
    Dovecot,
    SmtpSink,
    dovecot,
)
from tests.fakes.speech import FakeSpeech
from tests.test_email_inbox import inbox, letter


@pytest.fixture
def bot(dovecot: Dovecot) -> str:  # noqa: F811 - the imported fixture
    return dovecot.add_user("bot")


@pytest.fixture
async def speech() -> AsyncIterator[FakeSpeech]:
    fake = await FakeSpeech().start()
    yield fake
    await fake.stop()


async def test_a_pdf_and_a_recording_sent_by_email_reach_the_model_as_text(  # noqa: PLR0917 - fixtures
    make_settings: SettingsFactory,
    fake_llm: FakeLLM,
    dovecot: Dovecot,  # noqa: F811
    bot: str,
    sink: SmtpSink,
    speech: FakeSpeech,
) -> None:
    speech.transcript = "the invoice is due on the first"
    voice = {"base_url": speech.base_url}
    settings = make_settings(email=inbox(dovecot, bot, sink), voice=voice)
    mail = letter(bot, "Both attached.")
    invoice = documents.pdf(["Invoice 2041", "Total: 300 EUR"])
    mail.add_attachment(invoice, maintype="application", subtype="pdf", filename="invoice.pdf")
    mail.add_attachment(b"ID3 memo", maintype="audio", subtype="mpeg", filename="memo.mp3")
    await dovecot.deliver(mail, bot)
    async with Gateway(settings, channels=build_channels(settings)) as gateway:
        await sink.wait_for(1)
        await gateway.wait_idle()
    seen = fake_llm.requests[0].user_texts[0]
    assert "invoice.pdf: PDF, 2 pages" in seen and "Total: 300 EUR" in seen
    assert "memo.mp3" in seen and "the invoice is due on the first" in seen
    assert [c.upload for c in speech.called("transcriptions")] == [b"ID3 memo"]
