"""Telegram: a message whose send was cut off is delivered once, by the probing rule of
channels/telegram/recovery.py, against the fake Bot API (python-telegram-bot, unmodified).

Each test sets a chat up as a crash would leave it (the message arrived and nobody recorded
it, or it never arrived; a draft posted without its id; other chats and people writing in
between) and hands the message to a fresh channel, as the outbox of a restarted process
does. What a user would notice: the chat shows the message once.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Callable

import pytest

from channels.telegram.adapter import TelegramChannel
from channels.telegram.recovery import PROBE_WINDOW
from gateway.core.channel import KnownMessage, LostSend, SendAttempt
from gateway.core.messages import Action, ChatRef, OutboundMessage
from tests.conftest import SettingsFactory
from tests.fakes.telegram import FAST_PACING, FakeTelegram, section

SUPERGROUP = -1001234


def out(text: str, chat_id: int = 42, **kwargs: object) -> OutboundMessage:
    return OutboundMessage("telegram", str(chat_id), text, **kwargs)  # type: ignore[arg-type]


def lost_after(floor: int, *, draft: bool = False) -> SendAttempt:
    """An attempt of a process that died, made when ``floor`` was the newest id it knew."""
    return SendAttempt(time.time(), f"deadprocess/{floor}", draft=draft)


Fresh = Callable[[], TelegramChannel]


@pytest.fixture
async def fresh(make_settings: SettingsFactory, tg: FakeTelegram) -> AsyncIterator[Fresh]:
    """A new channel each call: a process that knows nothing of the sends before it."""
    made: list[TelegramChannel] = []

    def make() -> TelegramChannel:
        settings = make_settings(telegram=section(tg))
        made.append(
            TelegramChannel(settings.telegram, settings.channel_context(), pacing=FAST_PACING)
        )
        return made[-1]

    yield make
    for channel in made:
        await channel.stop()


async def other_chats(channel: TelegramChannel, count: int, first: int = 100) -> list[KnownMessage]:
    """Answers in ``count`` other private chats, recorded by the store: they share the
    bot's id counter with chat 42."""
    known = []
    for chat in range(first, first + count):
        receipt = await channel.send(out(f"answer for chat {chat}", chat))
        assert receipt is not None
        known.append(KnownMessage(str(chat), receipt, time.time()))
    return known


async def test_an_answer_that_arrived_unrecorded_is_not_sent_again(
    fresh: Fresh, tg: FakeTelegram
) -> None:
    answer = out("The meeting is at nine.")
    question = tg.message("when is the meeting?")["message_id"]
    dead = fresh()
    before = await other_chats(dead, 3)
    await dead.send(answer)  # arrived; the process died before recording it
    after = await other_chats(dead, 2, first=200)  # other chats went on meanwhile

    receipt = await fresh().resend(LostSend(answer, (lost_after(question),), (), (*before, *after)))

    assert tg.visible(42) == ["The meeting is at nine."]
    assert len(tg.sent(42)) == 1
    assert receipt == str(tg.sent(42)[0].result["message_id"])
    assert tg.visible(100) == ["answer for chat 100"]  # nothing of other chats touched


async def test_an_answer_that_never_arrived_is_sent_once(fresh: Fresh, tg: FakeTelegram) -> None:
    answer = out("The meeting is at nine.")
    question = tg.message("when is the meeting?")["message_id"]
    known = await other_chats(fresh(), 3)
    tg.message("and where?")  # the person wrote again meanwhile: not the bot's to edit

    await fresh().resend(LostSend(answer, (lost_after(question),), (), tuple(known)))

    assert tg.visible(42) == ["The meeting is at nine."]
    assert len(tg.sent(42)) == 1
    probes = tg.called("editMessageReplyMarkup")
    assert 1 <= len(probes) <= PROBE_WINDOW  # bounded, and the recorded ids were skipped
    assert not {int(p.params["message_id"]) for p in probes} & {int(k.message_id) for k in known}


async def test_a_draft_posted_without_its_id_becomes_the_answer(
    fresh: Fresh, tg: FakeTelegram
) -> None:
    answer = out("Here is **the answer**, complete.", turn_id="turn-1")
    question = tg.message("tell me")["message_id"]
    dead = fresh()
    await dead.post_draft(ChatRef("telegram", "42"), "Here is the ans", reply_to=None)

    await fresh().resend(LostSend(answer, (lost_after(question, draft=True),)))

    assert tg.visible(42) == ["Here is the answer, complete."]  # the draft, finished
    assert len(tg.sent(42)) == 1  # no second message beside it


async def test_a_draft_whose_turn_ends_without_an_answer_is_deleted(
    fresh: Fresh, tg: FakeTelegram
) -> None:
    question = tg.message("anything new?")["message_id"]
    dead = fresh()
    await dead.post_draft(ChatRef("telegram", "42"), "Let me check", reply_to=None)

    nothing = OutboundMessage("telegram", "42", "", turn_id="turn-1")  # as turn_ended sends
    await fresh().resend(LostSend(nothing, (lost_after(question, draft=True),)))

    assert tg.visible(42) == []


async def test_a_long_answer_cut_after_two_parts_is_completed(
    fresh: Fresh, tg: FakeTelegram
) -> None:
    answer = out("\n\n".join(f"paragraph {i} " + "x" * 3000 for i in range(3)))
    question = tg.message("a long one")["message_id"]
    tg.fail("sendMessage", 502, "Bad Gateway", skip=2)  # the third part never arrives
    with pytest.raises(Exception, match="Bad Gateway"):
        await fresh().send(answer)

    receipt = await fresh().resend(LostSend(answer, (lost_after(question),)))

    assert [text.split()[:2] for text in tg.visible(42)] == [
        ["paragraph", "0"],
        ["paragraph", "1"],
        ["paragraph", "2"],
    ]
    assert receipt is not None and len(receipt.split(",")) == 3


async def test_a_supergroup_counts_its_own_ids(fresh: Fresh, tg: FakeTelegram) -> None:
    question = tg.message("@switchboard_bot status?", chat_id=SUPERGROUP, chat_type="supergroup")
    answer = out(
        "All green.",
        SUPERGROUP,
        reply_to_message_id=f"{SUPERGROUP}:{question['message_id']}",
    )
    dead = fresh()
    await other_chats(dead, 40)  # busy private chats: another counter, not probed
    await dead.send(answer)

    await fresh().resend(LostSend(answer, (SendAttempt(time.time(), None),)))

    assert tg.visible(SUPERGROUP) == ["All green."]
    assert len(tg.sent(SUPERGROUP)) == 1
    assert len(tg.called("editMessageReplyMarkup")) <= PROBE_WINDOW


async def test_an_approval_request_keeps_its_buttons(fresh: Fresh, tg: FakeTelegram) -> None:
    request = out(
        "Approve `rm -rf build`?",
        actions=(Action("Approve", "/approve K7QW2M9P"), Action("Deny", "/deny K7QW2M9P")),
    )
    question = tg.message("clean up")["message_id"]
    await fresh().send(request)

    await fresh().resend(LostSend(request, (lost_after(question),)))

    [sent] = tg.sent(42)
    key = (42, sent.result["message_id"])
    assert tg.visible(42) == ["Approve rm -rf build?"]
    buttons = tg.markup[key]["inline_keyboard"][0]
    assert [b["callback_data"] for b in buttons] == ["/approve K7QW2M9P", "/deny K7QW2M9P"]


# -- where the rule cannot decide (docs/reliability.md): the message shows again ----------


async def test_an_answer_the_person_deleted_meanwhile_is_sent_again(
    fresh: Fresh, tg: FakeTelegram
) -> None:
    answer = out("The meeting is at nine.")
    question = tg.message("when is the meeting?")["message_id"]
    await fresh().send(answer)
    await tg.delete_by_user(42, tg.sent(42)[0].result["message_id"])

    await fresh().resend(LostSend(answer, (lost_after(question),)))

    assert tg.visible(42) == ["The meeting is at nine."]  # once on screen, sent twice
    assert len(tg.sent(42)) == 2


async def test_more_unknown_messages_than_the_window_before_the_answer_is_sent_again(
    fresh: Fresh, tg: FakeTelegram
) -> None:
    answer = out("The meeting is at nine.")
    question = tg.message("when is the meeting?")["message_id"]
    dead = fresh()
    await other_chats(dead, PROBE_WINDOW)  # unknown to the store: each costs a probe
    await dead.send(answer)

    await fresh().resend(LostSend(answer, (lost_after(question),)))

    assert tg.visible(42) == ["The meeting is at nine."] * 2
    assert len(tg.called("editMessageReplyMarkup")) == PROBE_WINDOW


# -- many lost at once: settled together, one scan per id space (issue 52) ------------------


def lost_before(floor: int, seconds: float = 10.0) -> SendAttempt:
    """An attempt of a process that died ``seconds`` ago (its requests numbered long since)."""
    return SendAttempt(time.time() - seconds, f"deadprocess/{floor}")


async def lost_at_once(
    fresh: Fresh, tg: FakeTelegram, chats: list[int], made: list[int]
) -> list[OutboundMessage]:
    """Each chat asked; a process that died had sent the answers of ``made`` (in that order,
    none recorded); a fresh one resends every chat's answer at the same moment."""
    floor = max(tg.message(f"question {c}", chat_id=c, user_id=c)["message_id"] for c in chats)
    answers = {c: out(f"answer for chat {c}", c) for c in chats}
    dead = fresh()
    for chat in made:
        await dead.send(answers[chat])
    channel = fresh()
    await asyncio.gather(
        *(channel.resend(LostSend(answers[c], (lost_before(floor),))) for c in chats)
    )
    return list(answers.values())


async def test_lost_sends_of_one_moment_cost_about_one_probe_each(
    fresh: Fresh, tg: FakeTelegram
) -> None:
    chats = list(range(100, 140))
    made = chats[:16]  # the others waited for a connection when the process died
    await lost_at_once(fresh, tg, chats, made)

    assert all(tg.visible(c) == [f"answer for chat {c}"] for c in chats)
    assert len(tg.sent()) == len(chats)  # the 16 found were not sent again
    # 16 found at their likeliest id, a wave or two of misses, one window for the first of
    # those never made; the others stop below the id its send got (before: 30 each)
    assert len(tg.called("editMessageReplyMarkup")) <= 2 * len(chats)


async def test_lost_sends_numbered_out_of_order_are_each_found_once(
    fresh: Fresh, tg: FakeTelegram
) -> None:
    chats = list(range(100, 120))
    made = [101, 100, 103, 102, *chats[4:]]  # two pairs reached Telegram swapped
    await lost_at_once(fresh, tg, chats, made)

    assert all(tg.visible(c) == [f"answer for chat {c}"] for c in chats)
    assert len(tg.sent()) == len(chats)
    assert len(tg.called("editMessageReplyMarkup")) <= 2 * len(chats)


async def test_lost_sends_in_any_order_are_never_doubled(fresh: Fresh, tg: FakeTelegram) -> None:
    chats = list(range(100, 140))
    made = chats[:36]
    random.Random(52).shuffle(made)  # the worst case: the order tells nothing
    await lost_at_once(fresh, tg, chats, made)

    assert all(tg.visible(c) == [f"answer for chat {c}"] for c in chats)
    assert len(tg.sent()) == len(chats)


async def test_lost_draft_posts_beside_the_new_runs_drafts_are_settled_without_waiting(
    fresh: Fresh, tg: FakeTelegram
) -> None:
    """A quick restart while answers streamed: the dead process's draft posts were made in
    4 chats and never in 16; the new process's resumed turns posted a draft in every chat
    at once (before the dead one's requests were surely numbered, so those ids bound
    nothing). Each answer is then edited into a draft: it makes no new id. The first that
    found nothing is sent as a new message instead, and its id bounds the others' scans;
    before, each waited 5 s for a bound that never came (a minute for a burst)."""
    chats = list(range(100, 120))
    floor = max(tg.message(f"question {c}", chat_id=c, user_id=c)["message_id"] for c in chats)
    dead = fresh()
    for chat in chats[:4]:
        await dead.post_draft(ChatRef("telegram", str(chat)), "Here is the ans", reply_to=None)
    attempt = SendAttempt(time.time(), f"deadprocess/{floor}", draft=True)  # just now
    channel = fresh()
    drafts = {
        c: await channel.post_draft(ChatRef("telegram", str(c)), "Here is", reply_to=None)
        for c in chats
    }
    recorded = [KnownMessage(str(c), drafts[c], time.time()) for c in chats]

    async def resend(chat: int) -> None:
        answer = out(f"answer for chat {chat}", chat, turn_id=f"turn-{chat}")
        others = tuple(k for k in recorded if k.chat_id != str(chat))
        await channel.resend(LostSend(answer, (attempt,), (drafts[chat],), others))

    async with asyncio.timeout(30):  # before: 5 s a chat that found nothing, one by one
        await asyncio.gather(*(resend(c) for c in chats))

    assert all(tg.visible(c) == [f"answer for chat {c}"] for c in chats)  # once, no draft left
    assert len(tg.called("editMessageReplyMarkup")) <= 2 * len(chats) + PROBE_WINDOW
