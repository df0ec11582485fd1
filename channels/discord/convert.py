"""Pure conversion of a ``discord.Message`` into an :class:`InboundMessage` (no I/O).

Identity is the author's snowflake (``sender_id``), never ``username`` or ``global_name``,
which anyone can set to an admin's name. ``platform_message_id`` is the message snowflake:
Discord replays missed events after a RESUME with the same id, so the journal turns a
replayed message into a duplicate instead of a second turn.

Where a message lives: a DM is its own chat (``chat_id`` = the DM channel id); a guild text
channel is a group chat (``chat_id`` = the channel id, which is also the key for
``groups`` rules and ``group_allow_from``); a thread is a session of its own inside its
parent channel (``chat_id`` = parent channel id, ``thread_id`` = thread id), so rules set
for a channel cover its threads. A thread the client has not cached (rare: its parent is
unknown) is treated as a channel of its own.

A forward (a message reference of type ``forward``) carries the original as a snapshot:
its text goes to ``InboundMessage.forwarded`` with where it came from, its files are fetched
like the message's own, and it is never taken for a reply.

``mentioned`` is true in DMs, when the bot's user is mentioned, or when the message replies
to one of the bot's messages; ``@everyone`` and role mentions do not count. The bot's own
mention is removed from the text. Messages from bots (including ourselves) and webhooks,
and system messages (joins, pins, ...), convert to ``None``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import discord

from gateway.core.messages import AttachmentKind, ChatType, InboundMessage, Said, kind_of

CHANNEL = "discord"
_CONVERSATION_TYPES = (discord.MessageType.default, discord.MessageType.reply)


@dataclass(frozen=True, slots=True)
class Converted:
    message: InboundMessage
    files: tuple[discord.Attachment, ...] = ()


ChannelLookup = Callable[[int], object | None]  # a channel the client knows, by id


def convert(
    message: discord.Message, bot_id: int, channels: ChannelLookup = lambda _: None
) -> Converted | None:
    """The inbound message for ``message``, or ``None`` if it is not one to hand on;
    ``channels`` names where a forwarded message was (``Client.get_channel``)."""
    author = message.author
    if author.bot or author.id == bot_id or message.webhook_id is not None:
        return None
    if message.type not in _CONVERSATION_TYPES:
        return None
    text = strip_mention(message.content, bot_id)
    forward = forwarded(message, channels)
    if not text and not message.attachments and not forward:
        return None  # e.g. a sticker, or a guild message whose content the intent withheld
    chat_id, thread_id, chat_type = locate(message.channel)
    is_dm = chat_type is ChatType.DM
    reference = _reply_reference(message)
    inbound = InboundMessage(
        channel=CHANNEL,
        chat_id=chat_id,
        sender_id=str(author.id),
        sender_name=author.display_name,
        text=text,
        platform_message_id=str(message.id),
        chat_type=chat_type,
        thread_id=thread_id,
        mentioned=is_dm or mentions(message, bot_id) or replies_to(message, bot_id),
        reply_to_message_id=str(reference.message_id)
        if reference is not None and reference.message_id
        else None,
        received_at=message.created_at,
        quote=replied(message, bot_id),
        chat_name="" if is_dm else chat_name(message.channel),
        forwarded=forward,
    )
    snapshots = [file for snapshot in message.message_snapshots for file in snapshot.attachments]
    return Converted(inbound, (*message.attachments, *snapshots))


QUOTE_MAX_CHARS = 4_000


def forwarded(message: discord.Message, channels: ChannelLookup) -> tuple[Said, ...]:
    """What a forward carries: Discord's snapshot of the original (its text, files and
    time, never its author), and where it was (the channel by name when the bot knows it,
    and the link to the original). The forwarder's comment, if any, is a message of its own."""
    reference = message.reference
    if reference is None or reference.type is not discord.MessageReferenceType.forward:
        return ()
    source = channels(reference.channel_id)
    name = chat_name(source) if source is not None else ""
    where = f"{name} ({reference.jump_url})" if name else reference.jump_url
    said = []
    for snapshot in message.message_snapshots:
        text = snapshot.content or ", ".join(f"[file: {a.filename}]" for a in snapshot.attachments)
        said.append(
            Said(
                "", text or "[a message without text]", snapshot.created_at.timestamp(), where=where
            )
        )
    return tuple(said)


def _reply_reference(message: discord.Message) -> discord.MessageReference | None:
    """The message reference of a reply (a forward's reference names what it forwards)."""
    reference = message.reference
    if reference is None or reference.type is not discord.MessageReferenceType.reply:
        return None
    return reference


def replied(message: discord.Message, bot_id: int) -> Said | None:
    """The message this one replies to, as Discord sent it along (text and author)."""
    reference = _reply_reference(message)
    if reference is None:
        return None
    resolved = reference.resolved or reference.cached_message
    if not isinstance(resolved, discord.Message):
        return None  # deleted, or not sent along
    text = strip_mention(resolved.content, bot_id)
    if not text and resolved.attachments:
        text = ", ".join(f"[file: {a.filename}]" for a in resolved.attachments)
    if not text:
        return None
    if len(text) > QUOTE_MAX_CHARS:
        text = text[:QUOTE_MAX_CHARS] + "…"
    return Said(
        resolved.author.display_name,
        text,
        at=resolved.created_at.timestamp(),
        by_bot=resolved.author.id == bot_id,
    )


def chat_name(channel: object) -> str:
    """``#general (Server)``: the channel (a thread's parent) and its server, by name."""
    if isinstance(channel, discord.Thread) and channel.parent is not None:
        channel = channel.parent
    name = getattr(channel, "name", None)
    guild = getattr(channel, "guild", None)
    if not name:
        return ""
    return f"#{name} ({guild.name})" if guild is not None and guild.name else f"#{name}"


def locate(channel: object) -> tuple[str, str | None, ChatType]:
    """``(chat_id, thread_id, chat_type)`` for the channel a message was written in."""
    if isinstance(channel, discord.Thread):
        parent = channel.parent_id
        return (str(parent), str(channel.id), ChatType.GROUP)
    channel_id = str(getattr(channel, "id", ""))
    if isinstance(channel, discord.DMChannel | discord.GroupChannel):
        return (channel_id, None, ChatType.DM)
    if isinstance(channel, discord.PartialMessageable) and channel.guild_id is None:
        return (channel_id, None, ChatType.DM)
    return (channel_id, None, ChatType.GROUP)


def mentions(message: discord.Message, bot_id: int) -> bool:
    """Whether Discord lists the bot among the users the message mentions."""
    return any(mentioned.id == bot_id for mentioned in message.mentions)


def replies_to(message: discord.Message, bot_id: int) -> bool:
    reference = _reply_reference(message)
    if reference is None:
        return False
    resolved = reference.resolved or reference.cached_message
    return isinstance(resolved, discord.Message) and resolved.author.id == bot_id


def strip_mention(content: str, bot_id: int) -> str:
    """``content`` without mentions of the bot (``<@id>`` and the legacy ``<@!id>``)."""
    return re.sub(rf"<@!?{bot_id}>", " ", content).strip()


def attachment_kind(attachment: discord.Attachment) -> AttachmentKind:
    return "voice" if attachment.is_voice_message() else kind_of(attachment.content_type)
