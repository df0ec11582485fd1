"""Who a Telegram message is from and whether it addresses the bot: decided from ids and
entities, never from names (pure conversion, real Telegram update shapes)."""

from __future__ import annotations

from typing import Any

import pytest
from telegram import Update

from channels.telegram.convert import BotIdentity, convert_update
from gateway.core.messages import ChatType
from tests.fakes.telegram import FakeTelegram

BOT = BotIdentity(id=123456, username="Switchboard_Bot")
tg = FakeTelegram("123456:TEST")
GROUP = {"chat_id": -100555, "chat_type": "supergroup"}


def convert(payload: dict[str, Any], key: str = "message") -> Any:
    update = Update.de_json({"update_id": 1, key: payload}, None)
    return convert_update(update, BOT)


@pytest.mark.parametrize(
    ("text", "addressed"),
    [
        ("just talking", False),
        ("@switchboard_bot are you there?", True),  # usernames are case-insensitive
        ("hey @someone_else", False),
        ("/status", True),
        ("/status@Switchboard_Bot", True),
        ("/status@other_bot", False),
    ],
)
def test_group_messages_are_turns_only_when_addressed(text: str, addressed: bool) -> None:
    converted = convert(tg.message(text, **GROUP))
    assert converted.message.chat_type is ChatType.GROUP
    assert converted.message.mentioned is addressed


def test_a_reply_to_the_bot_addresses_it_but_a_topic_start_does_not() -> None:
    reply = convert(tg.message("thanks", reply_to=tg.bot_message(-100555, 7), **GROUP))
    topic_start = {
        **tg.bot_message(-100555, 40),
        "forum_topic_created": {"name": "t", "icon_color": 1},
    }
    in_topic = convert(tg.message("hello", thread_id=40, reply_to=topic_start, **GROUP))
    assert reply.message.mentioned and reply.message.reply_to_message_id == "-100555:7"
    assert not in_topic.message.mentioned
    assert in_topic.message.thread_id == "40" and in_topic.message.session_key.endswith(":40")


def test_a_text_mention_of_the_bot_addresses_it() -> None:
    entity = {
        "type": "text_mention",
        "offset": 0,
        "length": 3,
        "user": {"id": BOT.id, "is_bot": True, "first_name": "S"},
    }
    converted = convert(tg.message("Bot, help", entities=[entity], **GROUP))
    assert converted.message.mentioned


def test_ids_not_names_identify_senders() -> None:
    dm = convert(tg.message("hi", chat_id=42, user_id=42, first_name="111", username="admin"))
    anonymous = convert(
        tg.message(
            "as the group", sender_chat={"id": -100555, "type": "supergroup", "title": "G"}, **GROUP
        )
    )
    post = convert(
        {
            "message_id": 3,
            "date": 0,
            "chat": {"id": -100777, "type": "channel", "title": "News"},
            "sender_chat": {"id": -100777, "type": "channel", "title": "News"},
            "text": "@Switchboard_Bot summarise",
        },
        key="channel_post",
    )
    assert (dm.message.sender_id, dm.message.sender_name) == ("42", "111")
    assert dm.message.chat_type is ChatType.DM and dm.message.mentioned
    assert anonymous.message.sender_id == "-100555"
    assert post.message.chat_type is ChatType.CHANNEL and post.message.sender_id == "-100777"
    assert post.message.platform_message_id == "-100777:3"


def test_a_message_id_is_the_same_whatever_update_carries_it() -> None:
    message = tg.message("once")
    first = Update.de_json({"update_id": 1, "message": message}, None)
    again = Update.de_json({"update_id": 99, "message": message}, None)
    assert (
        convert_update(first, BOT).message.platform_message_id
        == convert_update(again, BOT).message.platform_message_id
    )
