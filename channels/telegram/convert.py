"""Pure conversion of a Telegram ``Update`` into an :class:`InboundMessage` (no I/O).

Only new messages, channel posts and presses of our buttons (callback queries: the button's
data is a command, ``/approve ID``, which becomes the presser's message) become messages;
edits, reactions and every update type this version does not know convert to ``None``, and
the caller still confirms them (an update we cannot use must never block the ones behind it).

A forwarded message is someone else's words: its text goes to ``InboundMessage.forwarded``
with its origin (:func:`forwarded`), never to ``text``, so it cannot pass for the forwarder's
request, command or mention of the bot. The bot's ``@username`` a message begins with is not
part of its text (:func:`without_mention`), so ``@bot /stop`` is a command.

Identity comes from numeric ids only: ``sender_id`` is the user's id (or the posting chat's
id for anonymous admins and channel posts), never a username or display name, which anyone
can change. ``platform_message_id`` is ``"<chat id>:<message id>"``: the same on every
redelivery of the message, whatever ``update_id`` it arrives with, and unique across chats.
Files are described here (:class:`MediaRef`) and downloaded by :mod:`channels.telegram.media`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from telegram import (
    CallbackQuery,
    Message,
    MessageEntity,
    MessageOrigin,
    MessageOriginChannel,
    MessageOriginChat,
    MessageOriginHiddenUser,
    MessageOriginUser,
    Update,
)
from telegram.constants import ChatType as TgChatType

from gateway.core.messages import AttachmentKind, ChatType, InboundMessage, Said

CHANNEL = "telegram"
# What we ask Telegram for; anything else that still arrives converts to None.
ALLOWED_UPDATES = ("message", "edited_message", "channel_post", "callback_query")

_CHAT_TYPES: dict[str, ChatType] = {
    TgChatType.PRIVATE: ChatType.DM,
    TgChatType.GROUP: ChatType.GROUP,
    TgChatType.SUPERGROUP: ChatType.GROUP,
    TgChatType.CHANNEL: ChatType.CHANNEL,
}


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """Who the bot is, from ``getMe``: needed to tell whether a message addresses it."""

    id: int
    username: str  # without the leading "@"


@dataclass(frozen=True, slots=True)
class MediaRef:
    """A file attached to a message, to be fetched with ``getFile``."""

    kind: AttachmentKind
    file_id: str
    unique_id: str  # stable across bots and time: names the stored file
    size: int | None = None
    mime_type: str | None = None
    filename: str | None = None


@dataclass(frozen=True, slots=True)
class Converted:
    message: InboundMessage
    media: tuple[MediaRef, ...] = ()


def platform_message_id(chat_id: int | str, message_id: int | str) -> str:
    return f"{chat_id}:{message_id}"


def telegram_message_id(platform_id: str) -> int | None:
    """The Telegram message id inside a ``platform_message_id`` (``None`` if not ours)."""
    _, _, tail = platform_id.rpartition(":")
    try:
        return int(tail)
    except ValueError:
        return None


def convert_update(update: Update, bot: BotIdentity) -> Converted | None:
    """The inbound message an update carries, or ``None`` if it carries nothing to answer."""
    if update.callback_query is not None:
        return _pressed(update.callback_query)
    msg = update.message or update.channel_post or update.edited_message
    if msg is None:
        return None
    chat_type = _CHAT_TYPES.get(msg.chat.type)
    if chat_type is None:
        return None
    media = _media_of(msg)
    text = msg.text or msg.caption or ""
    if not text and not media:
        return None  # stickers, joins, pins, topic service messages ...
    sender_id, sender_name = _sender(msg)
    reply = _real_reply(msg)
    forward = forwarded(msg)
    inbound = InboundMessage(
        channel=CHANNEL,
        chat_id=str(msg.chat.id),
        sender_id=sender_id,
        sender_name=sender_name,
        text="" if forward else without_mention(text, bot),
        platform_message_id=platform_message_id(msg.chat.id, msg.message_id),
        chat_type=chat_type,
        thread_id=str(msg.message_thread_id)
        if msg.is_topic_message and msg.message_thread_id
        else None,
        # a forward's mentions and commands are its author's, addressed to no one here
        mentioned=chat_type is ChatType.DM or (not forward and addresses_bot(msg, bot)),
        reply_to_message_id=platform_message_id(msg.chat.id, reply.message_id) if reply else None,
        quote=quoted(msg, reply, bot),
        chat_name=(msg.chat.title or "") if chat_type is not ChatType.DM else "",
        forwarded=forward,
    )
    if update.edited_message is not None:  # the same message, changed: an edit of it
        edited = int(msg.edit_date.timestamp()) if msg.edit_date else update.update_id
        inbound = replace(
            inbound,
            edit_of=inbound.platform_message_id,
            platform_message_id=f"{inbound.platform_message_id}:edit:{edited}",
        )
    return Converted(inbound, media)


def _pressed(query: CallbackQuery) -> Converted | None:
    """A press of one of our buttons: its data, as the presser's own message in that chat
    (the presser's numeric id, as for every message; the gateway decides what they may do)."""
    chat = query.message.chat if query.message is not None else None
    chat_type = _CHAT_TYPES.get(chat.type) if chat is not None else None
    if chat is None or chat_type is None or not query.data:
        return None
    inbound = InboundMessage(
        channel=CHANNEL,
        chat_id=str(chat.id),
        sender_id=str(query.from_user.id),
        sender_name=query.from_user.full_name,
        text=query.data,
        platform_message_id=f"callback:{query.id}",  # one per press
        chat_type=chat_type,
        mentioned=True,
    )
    return Converted(inbound)


def without_mention(text: str, bot: BotIdentity) -> str:
    """``text`` without the bot's ``@username`` it starts with, as the other channels drop
    their mention of the bot: ``@bot /stop`` is the command ``/stop`` (like ``/stop@bot``),
    ``@bot stop`` the stop phrase, ``@bot what's up`` asks "what's up". A mention further
    on is part of what was said; a message of nothing but the mention keeps it."""
    if not bot.username:
        return text
    lead = re.match(rf"\s*@{re.escape(bot.username)}(?![\w@])[\s,:]*", text, re.IGNORECASE)
    if lead is None or lead.end() == len(text):
        return text
    return text[lead.end() :]


def addresses_bot(msg: Message, bot: BotIdentity) -> bool:
    """True for ``@botname``, a text mention of the bot, a command for it, or a reply to it."""
    handle = "@" + bot.username.lower()
    entities: dict[MessageEntity, str] = (
        msg.parse_entities() if msg.text else msg.parse_caption_entities()
    )
    for entity, segment in entities.items():
        if entity.type == MessageEntity.MENTION and segment.lower() == handle:
            return True
        if (
            entity.type == MessageEntity.TEXT_MENTION
            and entity.user is not None
            and entity.user.id == bot.id
        ):
            return True
        if entity.type == MessageEntity.BOT_COMMAND and entity.offset == 0:
            _, at, target = segment.partition("@")
            if not at or target.lower() == bot.username.lower():
                return True
    reply = _real_reply(msg)
    return bool(reply and reply.from_user and reply.from_user.id == bot.id)


QUOTE_MAX_CHARS = 4_000


def quoted(msg: Message, reply: Message | None, bot: BotIdentity) -> Said | None:
    """The replied-to message's text (or the part of it the person quoted), with its
    author: Telegram sends it with the message, so it is there even after ``/new``."""
    text = msg.quote.text if msg.quote is not None else ""
    if reply is not None:
        text = text or reply.text or reply.caption or ""
        if not text and (reply.photo or reply.document or reply.voice or reply.video):
            text = "[a file without text]"
        by_bot = reply.from_user is not None and reply.from_user.id == bot.id
        _, author = _sender(reply)
        at: float | None = reply.date.timestamp() if reply.date else None
    elif msg.external_reply is not None and text:  # a quote from another chat
        author, _ = _origin(msg.external_reply.origin)
        by_bot, at = False, None
    else:
        return None
    if not text:
        return None
    if len(text) > QUOTE_MAX_CHARS:
        text = text[:QUOTE_MAX_CHARS] + "…"
    return Said(author or "someone", text, at=at, by_bot=by_bot)


def forwarded(msg: Message) -> tuple[Said, ...]:
    """A forwarded message's content with its origin. A forward carries nothing of the
    forwarder's own (Telegram sends a comment as a message of its own), so all its text is
    the original author's: a message by a user (``forward_origin`` of type ``user``, or
    ``hidden_user`` when their privacy settings hide the account), by a group posting as
    itself or an anonymous admin (``chat``), or a channel post (``channel``)."""
    if msg.forward_origin is None:
        return ()
    text = msg.text or msg.caption or ""
    if not text:
        text = "[a file without text]"
    author, where = _origin(msg.forward_origin)
    return (Said(author, text, at=msg.forward_origin.date.timestamp(), where=where),)


def _origin(origin: MessageOrigin) -> tuple[str, str]:
    """(who wrote it, where) for the origin of a forward or of a quote from another chat."""
    if isinstance(origin, MessageOriginUser):
        user = origin.sender_user
        handle = f" (@{user.username})" if user.username else ""
        return f"{user.full_name}{handle}", ""
    if isinstance(origin, MessageOriginHiddenUser):
        return origin.sender_user_name, ""
    if isinstance(origin, MessageOriginChat):  # a group posting as itself, an anonymous admin
        chat = origin.sender_chat
        kind = "channel" if chat.type == TgChatType.CHANNEL else "group"
        where = f"the {kind} “{chat.title}”" if chat.title else f"a {kind}"
        return origin.author_signature or chat.title or "", where
    if isinstance(origin, MessageOriginChannel):
        chat = origin.chat
        where = f"the channel “{chat.title}”" if chat.title else "a channel"
        if chat.username:
            where += f" (t.me/{chat.username}/{origin.message_id})"
        return origin.author_signature or chat.title or "", where
    return "", ""  # a kind of origin this version does not know


def _real_reply(msg: Message) -> Message | None:
    """The message replied to, ignoring the topic-start message every topic message points at."""
    reply = msg.reply_to_message
    if reply is None:
        return None
    if msg.is_topic_message and (
        reply.message_id == msg.message_thread_id or reply.forum_topic_created is not None
    ):
        return None
    return reply


def _sender(msg: Message) -> tuple[str, str]:
    if msg.sender_chat is not None:  # channel posts, anonymous admins, "send as channel"
        chat = msg.sender_chat
        return str(chat.id), chat.title or chat.full_name or ""
    if msg.from_user is not None:
        return str(msg.from_user.id), msg.from_user.full_name
    return str(msg.chat.id), msg.chat.title or ""


def _media_of(msg: Message) -> tuple[MediaRef, ...]:
    if msg.photo:
        largest = msg.photo[-1]  # Telegram lists sizes smallest first
        return (
            MediaRef(
                "image", largest.file_id, largest.file_unique_id, largest.file_size, "image/jpeg"
            ),
        )
    if msg.voice:
        voice = msg.voice
        return (
            MediaRef(
                "voice",
                voice.file_id,
                voice.file_unique_id,
                voice.file_size,
                voice.mime_type or "audio/ogg",
            ),
        )
    files: tuple[tuple[AttachmentKind, Any], ...] = (
        ("audio", msg.audio),
        ("video", msg.video),
        ("video", msg.video_note),
        ("document", msg.document),
    )
    for label, item in files:
        if item is None:
            continue
        mime = getattr(item, "mime_type", None)
        kind = label
        if label == "document" and mime and mime.startswith("image/") and mime != "image/svg+xml":
            kind = "image"  # an uncompressed photo sent as a file
        return (
            MediaRef(
                kind,
                item.file_id,
                item.file_unique_id,
                item.file_size,
                mime,
                getattr(item, "file_name", None),
            ),
        )
    return ()
