"""Pure conversion of a Matrix room event into an :class:`InboundMessage` (no I/O).

Only ``m.room.message`` events from people count: ``m.text``, ``m.emote``, and files
(``m.image``, ``m.file``, ``m.audio``, ``m.video``). ``m.notice`` is what bots send (ours
included) and is never answered, so two bots cannot talk each other into a loop; edits
(``m.replace``) of an earlier message and our own events are skipped.

* ``chat_id`` is the room id (``!abc:example.org``); ``sender_id`` the person's Matrix id
  (``@dana:example.org``), which display names cannot forge. A thread (``m.thread``) is a
  conversation of its own: ``thread_id`` is its root event. ``platform_message_id`` is the
  event id, unique on the homeserver, so a sync replayed after a restart makes no second turn.
* A direct chat is a room with the bot and one person; anything bigger is a group, where
  the bot is addressed by ``m.mentions``, by its id or name in the text, or by a reply to
  one of its messages.
* A forward that says so (MSC2723's ``m.forwarded``: the original's sender, room and time)
  is someone else's words: its text goes to ``InboundMessage.forwarded``, never to ``text``,
  and it addresses nobody.
* A reply's quoted fallback (``> <@x> …`` lines, ``<mx-reply>``) is cut from the text and
  kept as a short note of what is being answered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gateway.core.messages import AttachmentKind, ChatType, InboundMessage, Said

CHANNEL = "matrix"
_FILES: dict[str, AttachmentKind] = {
    "m.image": "image",
    "m.file": "document",
    "m.audio": "audio",
    "m.video": "video",
}


@dataclass(frozen=True, slots=True)
class Room:
    """What conversion needs to know about the room an event is in."""

    room_id: str
    direct: bool
    names: dict[str, str]  # user id -> display name


@dataclass(frozen=True, slots=True)
class FileRef:
    url: str  # mxc://server/media-id
    kind: AttachmentKind
    name: str
    mime_type: str | None
    size: int | None


@dataclass(frozen=True, slots=True)
class Converted:
    message: InboundMessage
    files: tuple[FileRef, ...] = ()


def convert(
    event: dict[str, Any], room: Room, bot_user_id: str, *, our_events: frozenset[str] = frozenset()
) -> Converted | None:
    """The inbound message for a room event, or None when it is nothing to answer."""
    if event.get("type") != "m.room.message":
        return None
    sender, event_id = event.get("sender"), event.get("event_id")
    content = event.get("content")
    if not (isinstance(sender, str) and isinstance(event_id, str) and isinstance(content, dict)):
        return None
    if sender == bot_user_id:
        return None
    relation = _dict(content.get("m.relates_to"))
    if relation.get("rel_type") == "m.replace":
        return None  # an edit of an earlier message
    msgtype = content.get("msgtype")
    body = str(content.get("body") or "")
    files: tuple[FileRef, ...] = ()
    if msgtype in ("m.text", "m.emote"):
        text = _without_fallback(body)
        if msgtype == "m.emote":
            text = f"* {room.names.get(sender, sender)} {text}"
    elif msgtype in _FILES and isinstance(content.get("url"), str):
        files = (_file(content, msgtype),)
        text = _caption(content)
    else:
        return None  # m.notice (bots), m.location, m.key.verification.*, unknown
    reply_to = _dict(relation.get("m.in_reply_to")).get("event_id")
    thread_id = relation.get("event_id") if relation.get("rel_type") == "m.thread" else None
    if not text.strip() and not files:
        return None
    forward = _forwarded(content, text, room)
    own = "" if forward else _strip_mention(text, bot_user_id, room.names.get(bot_user_id))
    replying_to_us = isinstance(reply_to, str) and reply_to in our_events
    mentioned = room.direct or (
        not forward and (replying_to_us or _addressed(content, body, bot_user_id, room.names))
    )
    message = InboundMessage(
        channel=CHANNEL,
        chat_id=room.room_id,
        sender_id=sender,
        sender_name=room.names.get(sender, ""),
        text=own.strip(),
        platform_message_id=event_id,
        chat_type=ChatType.DM if room.direct else ChatType.GROUP,
        thread_id=thread_id if isinstance(thread_id, str) else None,
        mentioned=mentioned,
        reply_to_message_id=reply_to if isinstance(reply_to, str) else None,
        received_at=_time(event.get("origin_server_ts")),
        quote=_fallback_quote(body, room.names, bot_user_id, by_us=replying_to_us)
        if isinstance(reply_to, str)
        else None,
        forwarded=forward,
    )
    return Converted(message, files)


def _forwarded(content: dict[str, Any], text: str, room: Room) -> tuple[Said, ...]:
    """A forward's original, from the ``m.forwarded`` metadata of MSC2723 (the original's
    sender, room and time; its content, where the client sends that apart). Clients that
    forward by copying the content alone (Element) send nothing to tell a forward by."""
    origin = content.get("m.forwarded")
    if not isinstance(origin, dict):
        return ()
    original = _dict(origin.get("content")) or _dict(content.get("m.forwarded_content"))
    said = str(original.get("body") or "").strip() or text.strip() or "[a file without text]"
    sender = origin.get("sender")
    author = room.names.get(sender, sender) if isinstance(sender, str) else ""
    source = origin.get("room_id")
    where = ""
    if isinstance(source, str):
        where = "this room" if source == room.room_id else f"the room {source}"
    ts = origin.get("origin_server_ts")
    at = ts / 1000 if isinstance(ts, int) and not isinstance(ts, bool) else None
    return (Said(author, said, at, where=where),)


_QUOTED_AUTHOR = re.compile(r"^\*?\s*<([^>]+)>\s?")


def _fallback_quote(
    body: str, names: dict[str, str], bot_user_id: str, *, by_us: bool
) -> Said | None:
    """The replied-to message, from a reply's quoted fallback (``> <@who:server> text``
    lines): what clients send with a reply, so it needs no lookup and survives ``/new``."""
    quoted = []
    for line in body.split("\n"):
        if not line.startswith(">"):
            break
        quoted.append(line[1:].removeprefix(" "))
    if not quoted:
        return None
    author = ""
    match = _QUOTED_AUTHOR.match(quoted[0])
    if match:
        author = match.group(1)
        quoted[0] = quoted[0][match.end() :]
    text = "\n".join(quoted).strip()
    if not text:
        return None
    by_bot = by_us or author == bot_user_id
    return Said(names.get(author, author) or "someone", text[:4_000], by_bot=by_bot)


def _addressed(
    content: dict[str, Any],
    body: str,
    bot_user_id: str,
    names: dict[str, str],
) -> bool:
    mentions = content.get("m.mentions")
    if isinstance(mentions, dict) and bot_user_id in (mentions.get("user_ids") or []):
        return True
    if bot_user_id in body or bot_user_id in str(content.get("formatted_body") or ""):
        return True
    name = names.get(bot_user_id)
    return bool(
        name and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", _without_fallback(body), re.I)
    )


def _strip_mention(text: str, bot_user_id: str, name: str | None) -> str:
    """``@bot:example.org: hi`` or ``Bot: hi`` → ``hi`` (only at the start, and only the
    whole name: with the bot called Sam, ``Samstag?`` stays as it is)."""
    for who in (bot_user_id, name):
        if who and re.match(rf"{re.escape(who)}(?!\w)", text, re.IGNORECASE):
            return text[len(who) :].lstrip(":, ")
    return text


def _without_fallback(body: str) -> str:
    """The text without a reply's quoted fallback (``> `` lines before a blank line)."""
    lines = body.split("\n")
    if not lines or not lines[0].startswith("> "):
        return body
    index = 0
    while index < len(lines) and lines[index].startswith(">"):
        index += 1
    return "\n".join(lines[index:]).strip()


def _file(content: dict[str, Any], msgtype: str) -> FileRef:
    info = _dict(content.get("info"))
    kind = _FILES[msgtype]
    if kind == "audio" and "org.matrix.msc3245.voice" in content:
        kind = "voice"
    size = info.get("size")
    return FileRef(
        url=str(content["url"]),
        kind=kind,
        name=str(content.get("filename") or content.get("body") or "file"),
        mime_type=info.get("mimetype") if isinstance(info.get("mimetype"), str) else None,
        size=size if isinstance(size, int) else None,
    )


def _caption(content: dict[str, Any]) -> str:
    """A file's caption: the body, when a separate ``filename`` says the body is not it."""
    filename, body = content.get("filename"), str(content.get("body") or "")
    return body if filename and body != filename else ""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _time(value: Any) -> datetime:
    try:
        return datetime.fromtimestamp(int(value) / 1000, UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return datetime.now(UTC)
