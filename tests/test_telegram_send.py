"""Telegram delivery: long answers split without loss, formatting that degrades instead of
failing, flood control honoured by the outbox, no part sent twice, files out, pacing."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from channels._text import utf16_length
from channels.telegram.adapter import TelegramChannel
from channels.telegram.pacing import Pacer
from channels.telegram.sender import Pacing
from gateway.config.settings import Settings
from gateway.core.backoff import Backoff
from gateway.core.errors import ChannelPermanentError, ChannelRateLimited, ChannelTransientError
from gateway.core.messages import Attachment, ChatRef, OutboundMessage
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, text
from tests.fakes.telegram import FAST_PACING, FakeTelegram, section


@pytest.fixture
async def direct(
    make_settings: SettingsFactory, tg: FakeTelegram
) -> AsyncIterator[TelegramChannel]:
    """A channel used for sending only (no intake started)."""
    settings = make_settings(telegram=section(tg))
    telegram = TelegramChannel(settings.telegram, settings.channel_context(), pacing=FAST_PACING)
    yield telegram
    await telegram.stop()


def channel(settings: Settings, pacing: Pacing = FAST_PACING) -> TelegramChannel:
    return TelegramChannel(
        settings.telegram,
        settings.channel_context(),
        pacing=pacing,
        backoff=Backoff(base=0.01, cap=0.05),
    )


async def ask(tg: FakeTelegram, gateway: Gateway, text: str) -> None:
    """Send ``text`` as user 42 and wait until its turn is answered."""
    update = await tg.say(text)
    await tg.wait_confirmed(update["update_id"] + 1)
    await gateway.wait_idle()


def out(text: str, chat_id: str = "42", **kwargs: object) -> OutboundMessage:
    return OutboundMessage(channel="telegram", chat_id=chat_id, text=text, **kwargs)  # type: ignore[arg-type]


async def test_a_long_answer_is_split_without_breaking_the_code_block(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    code = "\n".join(f"print({i})  # step {i} 😀" for i in range(260))
    answer = "Here is the script:\n\n" + "word " * 700 + "\n\n```python\n" + code + "\n```\n\nDone."
    fake_llm.queue(text(answer))
    settings = make_settings(telegram=section(tg))
    async with Gateway(settings, channels=[channel(settings)]) as gateway:
        await ask(tg, gateway, "write the script")
    sent = tg.sent(42)
    texts = [c.params["text"] for c in sent]
    assert len(sent) >= 3
    assert all(utf16_length(t) <= 4096 for t in texts)
    joined = "\n".join(texts)
    assert all(f"print({i})  # step {i} 😀" in joined for i in range(260))  # nothing lost
    assert joined.index("print(0)") < joined.index("print(259)") < joined.index("Done.")
    code_parts = [c for c in sent if "print(" in c.params["text"]]
    assert len(code_parts) >= 2  # the block straddles a message edge...
    for part in code_parts:  # ...and each message carries it as a code block
        [pre] = [e for e in part.params["entities"] if e["type"] == "pre"]
        assert pre["language"] == "python"
        assert "```" not in part.params["text"]


async def test_rejected_formatting_falls_back_to_plain_text(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    fake_llm.queue(text("**Bold** claim with `code`"))
    tg.reject_entities = 1
    settings = make_settings(telegram=section(tg))
    async with Gateway(settings, channels=[channel(settings)]) as gateway:
        await ask(tg, gateway, "format something")
    attempts = tg.called("sendMessage")
    assert [bool(c.params.get("_ok")) for c in attempts] == [False, True]
    assert attempts[1].params["text"] == "**Bold** claim with `code`"
    assert "entities" not in attempts[1].params


async def test_flood_control_holds_the_chat_then_delivers_once(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    tg.fail("sendMessage", 429, "Too Many Requests: retry after 1", retry_after=1)
    settings = make_settings(telegram=section(tg))
    async with Gateway(settings, channels=[channel(settings)]) as gateway:
        await tg.say("are you flooded?")
        [reply] = await tg.wait_sent(1)
        await gateway.wait_idle()
    first, second = tg.called("sendMessage")
    assert second.at - first.at >= 0.9  # held by the outbox for retry_after, not retried at once
    assert "are you flooded?" in reply.params["text"]
    assert len(tg.sent()) == 1


async def test_a_retry_after_a_failed_part_does_not_resend_earlier_parts(
    direct: TelegramChannel, tg: FakeTelegram
) -> None:
    message = out("\n\n".join(f"paragraph {i} " + "x" * 3000 for i in range(3)))
    tg.fail("sendMessage", 502, "Bad Gateway", skip=1)
    with pytest.raises(ChannelTransientError):
        await direct.send(message)
    receipt = await direct.send(message)
    texts = tg.texts(42)
    assert [t.split()[0:2] for t in texts] == [
        ["paragraph", "0"],
        ["paragraph", "1"],
        ["paragraph", "2"],
    ]
    assert receipt is not None and len(receipt.split(",")) == 3


async def test_files_and_photos_go_out(
    direct: TelegramChannel, tg: FakeTelegram, tmp_path: Path
) -> None:
    photo = tmp_path / "chart.png"
    photo.write_bytes(b"\x89PNG fake")
    report = tmp_path / "report.pdf"
    report.write_bytes(b"%PDF-1.4 fake")
    attachments = (
        Attachment(kind="image", path=str(photo)),
        Attachment(kind="document", path=str(report)),
        Attachment(kind="document", path=str(tmp_path / "gone.txt")),
    )
    await direct.send(out("Here you go", attachments=attachments))
    kinds = [c.method for c in tg.sent(42)]
    assert kinds == ["sendMessage", "sendPhoto", "sendDocument", "sendMessage"]
    photo_call, document_call = tg.sent(42)[1:3]
    assert photo_call.files["photo"] == b"\x89PNG fake"
    assert document_call.files["document"] == b"%PDF-1.4 fake"
    assert "could not attach" in tg.texts(42)[-1]


async def test_errors_are_typed_for_the_outbox(direct: TelegramChannel, tg: FakeTelegram) -> None:
    tg.fail("sendMessage", 403, "Forbidden: bot was blocked by the user")
    with pytest.raises(ChannelPermanentError, match="blocked"):
        await direct.send(out("hi"))
    tg.fail("sendMessage", 400, "Bad Request: chat not found")
    with pytest.raises(ChannelPermanentError, match=r"(?i)chat not found"):
        await direct.send(out("hi"))
    tg.fail("sendMessage", 500, "Internal Server Error")
    with pytest.raises(ChannelTransientError):
        await direct.send(out("hi"))
    tg.fail("sendMessage", 429, "Too Many Requests: retry after 7", retry_after=7)
    with pytest.raises(ChannelRateLimited) as limited:
        await direct.send(out("hi"))
    assert limited.value.retry_after == 7


async def test_typing_and_replies_in_forum_topics(
    direct: TelegramChannel, tg: FakeTelegram
) -> None:
    await direct.typing(ChatRef("telegram", "-100777", "12"))
    await direct.send(
        out("in the topic", chat_id="-100777", thread_id="12", reply_to_message_id="-100777:55")
    )
    [action] = tg.called("sendChatAction")
    [sent] = tg.sent(-100777)
    assert action.params["message_thread_id"] == 12 and action.params["action"] == "typing"
    assert sent.params["message_thread_id"] == 12
    assert sent.params["reply_parameters"] == {
        "message_id": 55,
        "allow_sending_without_reply": True,
    }


class StoppedTime:
    """The pacer's clock and sleep, with time standing still: every message counts as sent
    in the same instant, and every pacing wait is recorded (not slept), however fast or
    loaded the machine is."""

    def __init__(self) -> None:
        self.slept: list[float] = []

    def clock(self) -> float:
        return 0.0

    async def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 3))

    def pacer(self, pacing: Pacing) -> Pacer:
        return Pacer(pacing.overall, clock=self.clock, sleep=self.sleep)


async def test_a_reply_right_after_another_in_the_same_chat_is_not_paced(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    stopped = StoppedTime()  # a leaky bucket would make every reply after the first wait
    settings = make_settings(telegram=section(tg))
    telegram = TelegramChannel(
        settings.telegram, settings.channel_context(), pacer=stopped.pacer(Pacing())
    )  # the default pacing
    async with Gateway(settings, channels=[telegram]) as gateway:
        for i in range(4):  # the next message is sent as soon as the answer arrives
            await tg.say(f"question {i}")
            await tg.wait_sent(i + 1, chat_id=42)
        await gateway.wait_idle()
    assert tg.texts(42) == [f"echo: question {i}" for i in range(4)]
    assert stopped.slept == []


async def test_sustained_sending_is_paced_and_long_waits_go_back_to_the_outbox(
    make_settings: SettingsFactory, tg: FakeTelegram
) -> None:
    stopped = StoppedTime()
    pacing = Pacing()
    settings = make_settings(telegram=section(tg))
    paced = TelegramChannel(
        settings.telegram, settings.channel_context(), pacer=stopped.pacer(pacing)
    )
    try:
        for i in range(int(pacing.per_chat.burst)):  # a burst in one instant: no wait
            await paced.send(out(f"message {i}"))
        assert stopped.slept == []
        await paced.send(out("one more"))  # beyond the burst: the sustained 1/s
        assert stopped.slept == [1.0]
        for i in range(int(pacing.per_group.burst)):
            await paced.send(out(f"group {i}", chat_id="-100555"))
        await paced.send(out("group sustained", chat_id="-100555"))  # 20/min: 3 s, slept
        assert stopped.slept == [1.0, 3.0]
        with pytest.raises(ChannelRateLimited) as limited:  # 6 s > max_wait: not slept
            await paced.send(out("group too fast", chat_id="-100555"))
    finally:
        await paced.stop()
    assert limited.value.retry_after > pacing.max_wait
    assert stopped.slept == [1.0, 3.0]
    assert len(tg.texts(42)) == pacing.per_chat.burst + 1
    assert "group too fast" not in tg.texts(-100555)


async def test_flood_control_for_one_chat_holds_only_that_chat(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    tg.fail("sendMessage", 429, "Too Many Requests: retry after 30", retry_after=30, chat_id=42)
    settings = make_settings(telegram=section(tg, allow_from=["*"]))
    async with Gateway(settings, channels=[channel(settings)]) as gateway:
        await tg.say("first, from the flooded chat", chat_id=42, user_id=42)
        await tg.wait_called("sendMessage")  # refused with retry_after 30
        await tg.say("second, from the flooded chat", chat_id=42, user_id=42)
        for other in (43, 44, 45):
            await tg.say(f"meanwhile, in chat {other}", chat_id=other, user_id=other)
        for other in (43, 44, 45):
            await tg.wait_sent(1, chat_id=other)
        await turns_committed(gateway)  # both turns of chat 42 are done; their answers wait
        held = await gateway.store.outbox.chat_held("telegram", "telegram:42", time.time())
        attempts_for_42 = [c for c in tg.called("sendMessage") if c.params["chat_id"] == 42]
        assert held and tg.sent(42) == []
        assert len(attempts_for_42) == 1  # not retried before retry_after, the second waits
        # the 30 s pass (moved forward in the store rather than waited for)
        await gateway.store.db.run(
            lambda conn: conn.execute(
                "UPDATE outbox SET next_attempt_at = 0 WHERE chat_key = 'telegram:42'"
            )
        )
        gateway.bus.outbound_ready("telegram")
        await tg.wait_sent(2, chat_id=42)
        await gateway.wait_idle()
    assert [tg.texts(other) for other in (43, 44, 45)] == [
        [f"echo: meanwhile, in chat {other}"] for other in (43, 44, 45)
    ]
    # each held answer once, in order, after the others
    assert tg.texts(42) == [
        "echo: first, from the flooded chat",
        "echo: second, from the flooded chat",
    ]
    assert min(c.at for c in tg.sent(42)) > max(c.at for c in tg.sent(45))


async def turns_committed(gateway: Gateway, timeout: float = 10.0) -> None:
    """Every accepted message's turn is committed (its answer may still wait to be sent)."""

    async def committed() -> bool:
        return await gateway.store.journal.open_count() == 0

    async with asyncio.timeout(timeout):
        await gateway.bus.wait_until(committed)


async def test_status_explains_the_answers_waiting_to_be_sent(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    """The owner's /status says what waits in the outbox and why, in words; /status itself
    is not counted as a message waiting."""
    tg.fail("sendMessage", 429, "Too Many Requests: retry after 30", retry_after=30, chat_id=42)
    settings = make_settings(telegram=section(tg, allow_from=["42", "7"], owners=["7"]))
    async with Gateway(settings, channels=[channel(settings)]) as gateway:

        async def both_answers_wait() -> bool:
            return await gateway.store.outbox.pending_count() == 2

        await tg.say("first", chat_id=42, user_id=42)
        await tg.wait_called("sendMessage")  # refused with retry_after 30
        await tg.say("second", chat_id=42, user_id=42)
        async with asyncio.timeout(10):
            await gateway.bus.wait_until(both_answers_wait)
        await tg.say("/status", chat_id=7, user_id=7)
        [status] = await tg.wait_sent(1, chat_id=7)
    lines = [line.lstrip("-• ") for line in status.params["text"].splitlines()]
    assert any(line.endswith(" · messages waiting for a turn: 0") for line in lines), lines
    assert "Messages to send: 2 messages not delivered yet" in lines
    assert any(
        re.fullmatch(
            r"1 message to telegram: the platform asked to slow down \(rate limit\); "
            r"next try in (29|30) s",
            line,
        )
        for line in lines
    ), lines
    assert "1 message to telegram: waiting behind an earlier message to the same chat" in lines
