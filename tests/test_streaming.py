"""Answers streamed by editing on Telegram: python-telegram-bot against the fake Bot API.

What a user would notice: the answer appears while it is written and grows in one message,
edited no faster than Telegram allows, and ends as the complete formatted answer; an answer
longer than a message continues in a second one; a restart in the middle of the answer
still leaves exactly one complete answer; in groups nothing streams unless configured. A
quick answer is one message, never a draft plus edits; where the Bot API shows previews
(``sendMessageDraft``), the words go there and the answer is sent once.

Most tests here are about the draft itself, so they stream from the first word
(``stream_after_seconds = 0``); the delay has tests of its own.
"""

from __future__ import annotations

from agent.guards.trace import latest_trace, read_trace
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, Step, streamed
from tests.fakes.llm import text as answer
from tests.fakes.telegram import FakeTelegram, fast_channel, section

GROUP = -1001234
WORDS = " ".join(f"word{i}" for i in range(49))
ANSWER = f"Here is **the answer**: {WORDS}."
FORMATTED = f"Here is the answer: {WORDS}."


channel = fast_channel


def streaming_on(tg: FakeTelegram, **overrides: object) -> dict[str, object]:
    settings: dict[str, object] = {"streaming": None, "stream_after_seconds": 0, **overrides}
    return section(tg, **settings)  # streaming unset: the default (on in DMs)


async def test_a_long_answer_grows_in_one_message_and_ends_formatted(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    fake_llm.queue(streamed(ANSWER, chunks=50, over=2.0))
    settings = make_settings(telegram=streaming_on(tg))
    async with Gateway(settings, channels=[channel(settings)]) as gateway:
        await tg.say("tell me everything")
        [draft] = await tg.wait_sent(1)
        assert tg.visible(42) != [FORMATTED]  # the first words show before the answer is done
        await gateway.wait_idle()
    assert len(tg.sent(42)) == 1  # one message, never a second copy
    assert ANSWER.startswith(draft.params["text"])
    assert tg.visible(42) == [FORMATTED]
    assert tg.visible_entities(42) == [[{"type": "bold", "offset": 8, "length": 10}]]
    edits = tg.called("editMessageText")
    # ~2 s of writing at one edit a second at most, plus the final formatted edit
    assert 1 <= len(edits) <= 5
    assert edits[-1].params["text"] == FORMATTED


async def test_a_restart_mid_answer_leaves_exactly_one_complete_answer(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    fake_llm.queue(streamed(ANSWER, chunks=60, over=6.0))
    settings = make_settings(telegram=streaming_on(tg))
    async with Gateway(settings, channels=[channel(settings)]) as gateway:
        await tg.say("tell me everything")
        await tg.wait_called("editMessageText")  # the draft is up (and recorded) and growing
        await gateway.stop(drain_timeout=0)  # the process goes away mid-answer
    [partial] = tg.visible(42)
    assert partial != FORMATTED

    fake_llm.queue(streamed(ANSWER, chunks=10, over=0.5))
    async with Gateway(settings, channels=[channel(settings)]) as gateway:
        await gateway.wait_idle()
    assert tg.visible(42) == [FORMATTED]
    assert len(tg.sent(42)) == 1


async def test_a_restart_before_the_final_edit_still_finishes_the_draft(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    fake_llm.queue(streamed(ANSWER, chunks=20, over=0.5))
    tg.fail("editMessageText", 502, "Bad Gateway", times=1000)  # no edit lands
    settings = make_settings(telegram=streaming_on(tg))
    async with Gateway(settings, channels=[channel(settings)]) as gateway:
        await tg.say("tell me everything")
        await tg.wait_for(  # the answer is committed and its delivery was tried
            lambda: any(c.params.get("text") == FORMATTED for c in tg.called("editMessageText"))
        )
        assert await gateway.store.outbox.pending_count("telegram") == 1
    tg.failures.clear()
    async with Gateway(settings, channels=[channel(settings)]) as gateway:
        await gateway.wait_idle()
    assert tg.visible(42) == [FORMATTED]
    assert len(tg.sent(42)) == 1


async def test_an_answer_longer_than_a_message_continues_in_a_second_one(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    prose = "\n\n".join(f"Paragraph {i}: " + "lorem ipsum " * 30 for i in range(8))
    code = "```python\n" + "\n".join(f"print({i})" for i in range(300)) + "\n```"
    long_answer = f"{prose}\n\n{code}\n\nThat is all."
    fake_llm.queue(streamed(long_answer, chunks=40, over=1.5))
    settings = make_settings(telegram=streaming_on(tg))
    async with Gateway(settings, channels=[channel(settings)]) as gateway:
        await tg.say("a long one please")
        await tg.wait_sent(1)
        await gateway.wait_idle()
    shown = tg.visible(42)
    assert len(shown) == 2
    assert len(tg.sent(42)) == 2
    assert shown[-1].endswith("That is all.")
    for i in range(300):  # every line of the code is there, once
        assert sum(text.count(f"print({i})\n") + text.endswith(f"print({i})") for text in shown)
    for text, entities in zip(shown, tg.visible_entities(42), strict=True):
        if "print(" in text:  # code kept as a code block on both sides of the cut
            assert any(e["type"] == "pre" for e in entities)


async def test_groups_do_not_stream_by_default(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    fake_llm.queue(streamed(ANSWER, chunks=20, over=0.5))
    settings = make_settings(
        telegram=streaming_on(tg, group_allow_from=[str(GROUP)], require_mention=False)
    )
    async with Gateway(settings, channels=[channel(settings)]) as gateway:
        await tg.say("tell me everything", chat_id=GROUP, chat_type="supergroup")
        await tg.wait_sent(1, GROUP)
        await gateway.wait_idle()
    [answer] = tg.sent(GROUP)
    assert answer.params["text"] == FORMATTED  # posted once, complete
    assert tg.called("editMessageText") == []


async def test_a_model_failing_mid_answer_leaves_only_the_fallbacks_answer(
    make_settings: SettingsFactory, fake_llm: FakeLLM, backup_llm: FakeLLM, tg: FakeTelegram
) -> None:
    first = " ".join(f"first{i}" for i in range(30))
    fake_llm.queue(  # streams a third of its answer, then the connection drops
        Step(text=first, stream_chunks=30, chunk_delay=0.05, cut_after=10, cut_by_reset=True)
    )
    backup_llm.queue(answer(ANSWER))
    fallback = {"model": "backup-model", "base_url": backup_llm.openai_url, "api_key": "sk-b"}
    settings = make_settings(telegram=streaming_on(tg), llm={"fallbacks": [fallback]})
    async with Gateway(settings, channels=[channel(settings)]) as gateway:
        await tg.say("tell me everything")
        [draft] = await tg.wait_sent(1)
        assert draft.params["text"].startswith("first0")  # the first model's words showed
        await gateway.wait_idle()
    assert tg.visible(42) == [FORMATTED]  # the fallback's whole answer, in the same message
    assert len(tg.sent(42)) == 1
    assert not any("first" in shown for shown in tg.visible(42))
    path = latest_trace(settings.data_dir / "traces")
    assert path is not None
    [failover] = [e for e in read_trace(path) if e["event"] == "fallback"]
    assert failover["model"] == f"openai fake-model at {fake_llm.openai_url}"
    assert failover["error"] == "LLMUnavailable"


async def test_a_quick_answer_is_one_message_without_a_draft(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    fake_llm.queue(streamed(ANSWER, chunks=10, over=0.1))  # done long before the delay
    # Streaming on as shipped (unset: on in direct chats); a delay no loaded machine reaches
    # stands in for the shipped 0.7 s, which a busy test run can outlast.
    settings = make_settings(telegram=section(tg, streaming=None, stream_after_seconds=30))
    async with Gateway(settings, channels=[channel(settings)]) as gateway:
        await tg.say("quick one")
        await tg.wait_sent(1)
        await gateway.wait_idle()
    assert tg.visible(42) == [FORMATTED]
    assert len(tg.sent(42)) == 1
    assert tg.called("editMessageText") == []  # no draft to finish
    assert tg.called("sendMessageDraft") == []


async def test_an_answer_arriving_whole_after_the_delay_is_still_one_message(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    # A turn that waited (for a model slot, a slow first token) past the delay, then got the
    # answer at once: showing it as a draft would only add a draft before the same answer.
    fake_llm.queue(streamed(ANSWER, chunks=1, over=0.0))
    settings = make_settings(telegram=streaming_on(tg))  # the delay is already over
    async with Gateway(settings, channels=[channel(settings)]) as gateway:
        await tg.say("one piece")
        await tg.wait_sent(1)
        await gateway.wait_idle()
    assert tg.visible(42) == [FORMATTED]
    assert len(tg.sent(42)) == 1
    assert tg.called("editMessageText") == []


async def test_a_slow_answer_shows_its_words_once_the_turn_has_run_a_while(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    fake_llm.queue(streamed(ANSWER, chunks=40, over=2.0))
    settings = make_settings(telegram=section(tg, streaming=None))  # the defaults
    async with Gateway(settings, channels=[channel(settings)]) as gateway:
        await tg.say("tell me everything")
        [draft] = await tg.wait_sent(1)
        assert draft.params["text"] != FORMATTED  # words while the model still writes
        await gateway.wait_idle()
    assert tg.visible(42) == [FORMATTED]
    assert len(tg.sent(42)) == 1


async def test_previews_show_the_words_and_the_answer_is_sent_once(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    tg.draft_previews = True
    fake_llm.queue(streamed(ANSWER, chunks=40, over=2.0))
    settings = make_settings(telegram=streaming_on(tg))
    async with Gateway(settings, channels=[channel(settings)]) as gateway:
        await tg.say("tell me everything")
        await tg.wait_for(lambda: 42 in tg.previews)
        preview_id, words = tg.previews[42]
        assert ANSWER.startswith(words) and words != ANSWER  # the first words, as written
        await tg.wait_sent(1)
        await gateway.wait_idle()
    assert tg.visible(42) == [FORMATTED]  # one message: no draft was posted
    assert len(tg.sent(42)) == 1
    assert 42 not in tg.previews  # the answer replaced the preview
    updates = tg.called("sendMessageDraft")
    assert len(updates) >= 2 and {c.params["draft_id"] for c in updates} == {preview_id}
    assert tg.called("editMessageText") == [] and tg.called("deleteMessage") == []


async def test_without_previews_the_draft_is_edited_and_previews_are_not_asked_again(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    fake_llm.queue(streamed(ANSWER, chunks=40, over=2.0))
    fake_llm.queue(streamed(ANSWER, chunks=40, over=2.0))
    settings = make_settings(telegram=streaming_on(tg))  # the fake: "method not found"
    async with Gateway(settings, channels=[channel(settings)]) as gateway:
        await tg.say("tell me everything")
        [draft] = await tg.wait_sent(1)
        assert draft.params["text"] != FORMATTED  # the words came as a draft message
        await gateway.wait_idle()
        await tg.say("and again")
        await tg.wait_sent(2)
        await gateway.wait_idle()
    assert tg.visible(42) == [FORMATTED, FORMATTED]
    assert len(tg.sent(42)) == 2
    assert len(tg.called("sendMessageDraft")) == 1  # refused once, then never asked
