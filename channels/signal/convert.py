"""Pure conversion of signal-cli's ``receive`` notifications (no I/O).

A notification carries one envelope (signal-cli-jsonrpc(5)): who sent it (``sourceNumber``,
``sourceUuid``), when (``timestamp``, which with the sender *is* the message's identity on
Signal) and what: a ``dataMessage`` (a text, files, a quote, mentions, the group it was
written in), an ``editMessage`` (a new version of an earlier one), a ``receiptMessage``
(the recipient's devices got our messages), or things we do not answer (typing, calls,
stories, sync messages of other devices, reactions).

* ``sender_id`` is the sender's number (``+4915112345678``) or, when signal-cli does not
  know it (Signal's phone number privacy), the account's UUID. A direct chat's ``chat_id`` is
  the sender; a group's is its id (base64, as ``signal-cli listGroups`` shows it).
* ``platform_message_id`` is ``<sender's UUID>:<timestamp>``: the same envelope delivered
  again (a replayed event stream, a daemon restart) makes no second turn.
* In a group the bot is addressed by a mention (by its number or UUID) or by a quote of
  one of its messages; a mention's placeholder (U+FFFC) becomes the mentioned name.
* A quote is the replied-to message's text (``InboundMessage.quote``). Signal has no
  forwarding metadata: a forwarded message is a copy, indistinguishable from the person's own.
"""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gateway.core.messages import AttachmentKind, ChatType, InboundMessage, Said, kind_of

CHANNEL = "signal"
MENTION = "\ufffc"  # where Signal puts a mention in the text


@dataclass(frozen=True, slots=True)
class FileRef:
    """An inbound attachment, fetched with ``getAttachment`` by its id."""

    id: str
    kind: AttachmentKind
    name: str
    mime_type: str | None
    size: int | None


@dataclass(frozen=True, slots=True)
class Converted:
    message: InboundMessage
    files: tuple[FileRef, ...] = ()
    timestamp: int = 0  # the message's Signal timestamp (what a reaction or a quote names)
    author: str = ""  # its author as Signal addresses them (number or UUID)


@dataclass(frozen=True, slots=True)
class Receipt:
    """The recipient's devices got messages we sent: their timestamps."""

    sender: str  # number or UUID, as ``sender_id``
    sender_uuid: str
    timestamps: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Bot:
    """Who the bot is on Signal: its number (signal-cli names the bot by it in mentions
    and quotes, as it knows its own number)."""

    number: str

    def __contains__(self, who: object) -> bool:
        return bool(who) and who == self.number


def convert(params: dict[str, Any], bot: Bot) -> Converted | Receipt | None:
    """What a notification holds for the gateway, or None when nothing."""
    envelope = _dict(params.get("envelope"))
    number, uuid = _text(envelope.get("sourceNumber")), _text(envelope.get("sourceUuid"))
    sender = number or uuid or _text(envelope.get("source"))
    timestamp = envelope.get("timestamp")
    if not sender or not isinstance(timestamp, int) or sender in bot or uuid in bot:
        return None
    receipt = _dict(envelope.get("receiptMessage"))
    if receipt:
        stamps = tuple(t for t in receipt.get("timestamps") or () if isinstance(t, int))
        if receipt.get("isDelivery") and stamps:
            return Receipt(sender, uuid or sender, stamps)
        return None
    edit = _dict(envelope.get("editMessage"))
    data = _dict(edit.get("dataMessage")) if edit else _dict(envelope.get("dataMessage"))
    if not data or data.get("reaction") or data.get("remoteDelete"):
        return None
    group = _dict(data.get("groupInfo"))
    if group and group.get("type") == "UPDATE" and not data.get("message"):
        return None
    files = tuple(_file(a) for a in data.get("attachments") or () if isinstance(a, dict))
    files = tuple(f for f in files if f.id)
    text = _with_mentions(_text(data.get("message")), data.get("mentions"), bot)
    if not text.strip() and not files:
        return None
    identity = uuid or sender
    quote = _quote(_dict(data.get("quote")), bot)
    direct = not group.get("groupId")
    mentioned = direct or _mentions_bot(data.get("mentions"), bot) or bool(quote and quote.by_bot)
    target = edit.get("targetSentTimestamp")
    message = InboundMessage(
        channel=CHANNEL,
        chat_id=sender if direct else str(group["groupId"]),
        sender_id=sender,
        sender_name=_text(envelope.get("sourceName")),
        text=text.strip(),
        platform_message_id=f"{identity}:{timestamp}",
        chat_type=ChatType.DM if direct else ChatType.GROUP,
        mentioned=mentioned,
        reply_to_message_id=_quoted_id(_dict(data.get("quote"))),
        received_at=_time(timestamp),
        edit_of=f"{identity}:{target}" if isinstance(target, int) else None,
        quote=quote,
        chat_name="" if direct else _text(group.get("groupName")),
    )
    return Converted(message, files, timestamp, sender)


def _with_mentions(text: str, mentions: Any, bot: Bot) -> str:
    """The text with each mention's placeholder replaced by the name it stands for; the
    bot's own mention at the start is dropped (``@bot what's up`` asks "what's up")."""
    if MENTION not in text or not isinstance(mentions, list):
        return text
    units = text.encode("utf-16-le")
    pieces, cursor = [], 0
    for mention in sorted(
        (m for m in mentions if isinstance(m, dict)), key=lambda m: int(m.get("start") or 0)
    ):
        start, length = int(mention.get("start") or 0), int(mention.get("length") or 1)
        if start * 2 < cursor:
            continue
        pieces.append(units[cursor : start * 2].decode("utf-16-le", "replace"))
        who = _text(mention.get("number")) or _text(mention.get("uuid"))
        ours = who in bot or _text(mention.get("uuid")) in bot
        lead = not "".join(pieces).strip()
        if not (ours and lead):
            pieces.append("@" + (_text(mention.get("name")) or who or "someone"))
        cursor = (start + length) * 2
    pieces.append(units[cursor:].decode("utf-16-le", "replace"))
    return "".join(pieces).replace(MENTION, "")


def _mentions_bot(mentions: Any, bot: Bot) -> bool:
    return isinstance(mentions, list) and any(
        isinstance(m, dict) and (_text(m.get("number")) in bot or _text(m.get("uuid")) in bot)
        for m in mentions
    )


def _quote(quote: dict[str, Any], bot: Bot) -> Said | None:
    if not quote:
        return None
    author = _text(quote.get("authorNumber")) or _text(quote.get("authorUuid"))
    author = author or _text(quote.get("author"))
    text = _text(quote.get("text")).replace(MENTION, "@…").strip()
    if not text:
        files = quote.get("attachments") or ()
        text = f"[{len(files)} attachment(s)]" if files else ""
    if not text:
        return None
    by_bot = author in bot or _text(quote.get("authorUuid")) in bot
    return Said("" if by_bot else author, text[:4_000], by_bot=by_bot)


def _quoted_id(quote: dict[str, Any]) -> str | None:
    """The quoted message's platform id (its author's UUID and timestamp, as ours)."""
    author = _text(quote.get("authorUuid")) or _text(quote.get("authorNumber"))
    stamp = quote.get("id")
    return f"{author}:{stamp}" if author and isinstance(stamp, int) else None


def _file(attachment: dict[str, Any]) -> FileRef:
    mime = _text(attachment.get("contentType")) or None
    name = _text(attachment.get("filename"))
    kind = kind_of(mime)
    if kind == "audio" and not name:
        kind = "voice"  # Signal's voice notes come without a file name
    size = attachment.get("size")
    return FileRef(
        id=_text(attachment.get("id")),
        kind=kind,
        name=name or f"{kind}{_suffix(mime)}",
        mime_type=mime,
        size=size if isinstance(size, int) else None,
    )


def _suffix(mime: str | None) -> str:
    return (mimetypes.guess_extension((mime or "").split(";")[0].strip()) or "") if mime else ""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _time(millis: int) -> datetime:
    try:
        return datetime.fromtimestamp(millis / 1000, UTC)
    except (ValueError, OverflowError, OSError):
        return datetime.now(UTC)
