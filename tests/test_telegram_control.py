"""/stop and edits on Telegram, through python-telegram-bot against the fake Bot API: the
Stop button under a streamed draft, and an edited message that had not been answered yet."""

from __future__ import annotations

import asyncio
import logging

import pytest

from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory, edit_applied
from tests.fakes.llm import FakeLLM, held, streamed, text
from tests.fakes.telegram import FakeTelegram, fast_channel, section

LONG = " ".join(f"word{i}" for i in range(200))
GROUP = -1001234


async def test_the_stop_button_under_a_streamed_draft_stops_the_answer(
    make_settings: SettingsFactory,
    fake_llm: FakeLLM,
    tg: FakeTelegram,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="gateway.runtime.turns.chat")
    fake_llm.queue(streamed(LONG, chunks=100, over=20))
    settings = make_settings(telegram=section(tg, streaming=True))
    async with Gateway(settings, channels=[fast_channel(settings)]) as gateway:
        await tg.say("write me something long")
        [draft] = await tg.wait_called("sendMessage")
        assert draft.params["reply_markup"]["inline_keyboard"][0][0]["text"] == "Stop"
        await tg.press(draft, "/stop", user_id=42)
        await tg.wait_for(lambda: any(t.startswith("Stopped.") for t in tg.visible(42)))
        await gateway.wait_idle()
    kept, stopped = tg.visible(42)
    shown = draft.result["message_id"]
    # the draft keeps what it had written, marked, without its button; the notice follows
    assert tg.chat[(42, shown)][0] == kept and (42, shown) not in tg.markup
    assert kept.startswith("word0 word1 ") and kept.endswith("\n\nStopped before it finished.")
    assert ("italic", "Stopped before it finished.") in tg.formatted(42)[0][1]
    assert stopped.startswith("Stopped.")
    assert not any("word199" in t for t in tg.texts(42))
    [ended] = [r.getMessage() for r in caplog.records if r.name == "gateway.runtime.turns.chat"]
    assert " stopped by " in ended and "answered" not in ended  # the log says what happened


async def test_an_edit_before_the_answer_replaces_the_message(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    gate = asyncio.Event()
    fake_llm.queue(held(gate, "first answered"), text("second answered"))
    settings = make_settings(telegram=section(tg))
    async with Gateway(settings, channels=[fast_channel(settings)]) as gateway:
        await tg.say("first")
        await fake_llm.wait_for_requests(1)
        waiting = await tg.say("book a table for two")
        await tg.edit(waiting, "book a table for four")
        await edit_applied(gateway, "telegram", f"42:{waiting['message']['message_id']}")
        gate.set()
        await tg.wait_sent(2)
        await gateway.wait_idle()
    assert tg.texts(42) == ["first answered", "second answered"]
    second = fake_llm.requests[1]
    assert "book a table for four" in second.last_user_text
    assert "for two" not in str(second.body)


@pytest.mark.parametrize("stop", ["/stop", "stop"])
async def test_in_a_group_the_bot_addressed_first_then_stop_stops_the_turn(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram, stop: str
) -> None:
    group = {"chat_id": GROUP, "chat_type": "supergroup"}
    gate = asyncio.Event()
    fake_llm.queue(held(gate, "an essay nobody wants any more"))
    settings = make_settings(telegram=section(tg, group_allow_from=[str(GROUP)]))
    async with Gateway(settings, channels=[fast_channel(settings)]) as gateway:
        await tg.say(f"@{tg.username} write another essay", **group)
        await fake_llm.wait_for_requests(1)
        await tg.say(f"@{tg.username} {stop}", **group)
        [stopped] = await tg.wait_sent(1, chat_id=GROUP)
        gate.set()
        await gateway.wait_idle()
    assert stopped.params["text"].startswith("Stopped.")
    assert tg.texts(GROUP) == [stopped.params["text"]]  # no essay, no answer to the stop
    assert len(fake_llm.requests) == 1


async def test_a_stop_keeps_the_words_a_preview_showed_as_a_message(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    tg.draft_previews = True  # the words show in sendMessageDraft's preview, not a message
    fake_llm.queue(streamed(LONG, chunks=100, over=20))
    settings = make_settings(telegram=section(tg, streaming=True))
    async with Gateway(settings, channels=[fast_channel(settings)]) as gateway:
        await tg.say("write me something long")
        await tg.wait_for(lambda: 42 in tg.previews)
        await tg.say("/stop")
        await tg.wait_for(lambda: any(t.startswith("Stopped.") for t in tg.visible(42)))
        await gateway.wait_idle()
    kept, stopped = tg.visible(42)
    assert kept.startswith("word0 word1 ") and kept.endswith("\n\nStopped before it finished.")
    assert stopped.startswith("Stopped.") and 42 not in tg.previews
