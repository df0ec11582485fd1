"""Pure conversion of a Slack event into an :class:`InboundMessage` (no I/O).

Which events: ``message`` (DMs arrive as ``message.im``; channel messages only if the app
also subscribes to ``message.channels``) and ``app_mention``. An edit (``message_changed``)
converts to the changed message with ``edit_of`` set; deletions, joins, bot messages and
other subtypes convert to ``None``.

The same message reaches us more than once: as ``message`` *and* ``app_mention`` (two
different ``event_id`` values), and Slack retries an event it did not see acknowledged up to
three more times (same ``event_id``). ``platform_message_id`` is therefore
``"<channel>:<ts>"`` — the message's own identity, equal across both event types and all
retries — so the durable journal makes exactly one turn of it. Retries are never dropped
because of ``X-Slack-Retry-Num``: the first delivery may never have arrived.

Where a message lives: ``chat_id`` is the conversation id (``D…`` for a DM, ``C…``/``G…``
for channels); a reply in a thread has ``thread_id`` = the thread's parent ``ts``, so a
thread is a session of its own and answers stay in it. Identity is the user id (``U…``),
never a display name.

A shared (forwarded) message comes as an attachment of the message that shares it: its text
goes to ``InboundMessage.forwarded`` with its author and channel (:func:`shares`), never to
``text``, which holds only the sharer's own comment.

``mentioned`` is true in DMs, for ``app_mention``, when the text mentions the bot's user,
or when the message is a reply in a thread the bot started (``parent_user_id``).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from gateway.core.messages import AttachmentKind, ChatType, InboundMessage, Said, kind_of

CHANNEL = "slack"
# Subtypes that are still a person writing to us; every other subtype is not a message.
_CONVERSATIONAL = {None, "file_share", "thread_broadcast"}
_LINK = re.compile(r"<([^<>|]+)(?:\|([^<>]*))?>")


@dataclass(frozen=True, slots=True)
class FileRef:
    """A file shared with a message, to be fetched with the bot token."""

    id: str
    name: str
    mime_type: str | None
    size: int | None
    url: str | None
    subtype: str | None = None


@dataclass(frozen=True, slots=True)
class Converted:
    message: InboundMessage
    files: tuple[FileRef, ...] = ()


def message_key(channel: str, ts: str) -> str:
    return f"{channel}:{ts}"


def convert(event: dict[str, Any], bot_user_id: str | None) -> Converted | None:
    """The inbound message for a ``message`` or ``app_mention`` event, or ``None``."""
    kind = event.get("type")
    if kind not in ("message", "app_mention"):
        return None
    if event.get("subtype") == "message_changed":
        return _edited(event, bot_user_id)
    if event.get("subtype") not in _CONVERSATIONAL or event.get("bot_id"):
        return None
    user, channel, ts = event.get("user"), event.get("channel"), event.get("ts")
    if not (isinstance(user, str) and isinstance(channel, str) and isinstance(ts, str)):
        return None
    if bot_user_id is not None and user == bot_user_id:
        return None
    raw_text = str(event.get("text") or "")
    files = tuple(_file(f) for f in event.get("files") or () if isinstance(f, dict))
    text = plain_text(raw_text, bot_user_id)
    shared = shares(event)
    if not text and not files and not shared:
        return None
    is_dm = event.get("channel_type") == "im" or channel.startswith("D")
    thread_ts = event.get("thread_ts")
    thread_id = thread_ts if isinstance(thread_ts, str) and thread_ts != ts else None
    mentioned = (
        is_dm
        or kind == "app_mention"
        or (bot_user_id is not None and f"<@{bot_user_id}" in raw_text)
        or (thread_id is not None and event.get("parent_user_id") == bot_user_id)
    )
    profile = event.get("user_profile") or {}
    inbound = InboundMessage(
        channel=CHANNEL,
        chat_id=channel,
        sender_id=user,
        sender_name=str(profile.get("display_name") or profile.get("real_name") or ""),
        text=text,
        platform_message_id=message_key(channel, ts),
        chat_type=ChatType.DM if is_dm else ChatType.GROUP,
        thread_id=thread_id,
        mentioned=mentioned,
        received_at=_time(ts),
        forwarded=shared,
    )
    return Converted(inbound, files)


def shares(event: dict[str, Any]) -> tuple[Said, ...]:
    """The messages a message shares (forwards), or unfurls from a pasted link: Slack sends
    each as an attachment marked ``is_share`` or ``is_msg_unfurl``, with its author, text,
    time and channel. The sharer's own words are the event's ``text``."""
    said = []
    for item in event.get("attachments") or ():
        if not isinstance(item, dict) or not (item.get("is_share") or item.get("is_msg_unfurl")):
            continue
        author = item.get("author_name") or item.get("author_subname") or item.get("author_id")
        text = plain_text(str(item.get("text") or item.get("fallback") or ""), None)
        channel = item.get("channel_name")
        url = item.get("from_url") or item.get("original_url")
        where = " ".join(
            part for part in (f"#{channel}" if channel else "", f"({url})" if url else "") if part
        )
        try:
            at: float | None = float(item["ts"])
        except (KeyError, TypeError, ValueError):
            at = None
        said.append(Said(str(author or ""), text or "[a message without text]", at, where=where))
    return tuple(said)


def _edited(event: dict[str, Any], bot_user_id: str | None) -> Converted | None:
    """A person changed a message: the new text, as an edit of the original (its own
    ``platform_message_id`` names the edit, so a retried event stays one)."""
    changed = event.get("message")
    channel = event.get("channel")
    if not isinstance(changed, dict) or not isinstance(channel, str):
        return None
    edited = changed.get("edited") or {}
    if not isinstance(edited, dict) or changed.get("subtype") not in _CONVERSATIONAL:
        return None  # not a text edit (an unfurl, a thread's reply count changing, ...)
    inner = {**changed, "type": "message", "channel": channel, "subtype": None}
    inner.setdefault("channel_type", event.get("channel_type"))
    converted = convert(inner, bot_user_id)
    if converted is None:
        return None
    original = converted.message.platform_message_id
    message = replace(
        converted.message,
        edit_of=original,
        platform_message_id=f"{original}:edit:{edited.get('ts') or event.get('ts')}",
    )
    return Converted(message, converted.files)


def convert_command(command: dict[str, Any]) -> InboundMessage | None:
    """A slash command as the person's own message (``/stop`` with what followed it)."""
    name, channel, user = command.get("command"), command.get("channel_id"), command.get("user_id")
    if not (isinstance(name, str) and isinstance(channel, str) and isinstance(user, str)):
        return None
    words = f"{name} {command.get('text') or ''}".strip()
    is_dm = channel.startswith("D")
    return InboundMessage(
        channel=CHANNEL,
        chat_id=channel,
        sender_id=user,
        sender_name=str(command.get("user_name") or ""),
        text=words,
        platform_message_id=f"command:{channel}:{command.get('trigger_id') or ''}",
        chat_type=ChatType.DM if is_dm else ChatType.GROUP,
        mentioned=True,
    )


def plain_text(text: str, bot_user_id: str | None) -> str:
    """Slack's markup as plain text: ``<@U1>`` → ``@U1``, links, channels; bot mention removed."""
    if bot_user_id:
        text = re.sub(rf"<@{re.escape(bot_user_id)}(\|[^>]*)?>", " ", text)

    def unlink(match: re.Match[str]) -> str:
        target, label = match.group(1), match.group(2)
        if target.startswith(("@", "#")):
            return f"{target[0]}{label}" if label else target
        if target.startswith("!"):
            return f"@{label or target[1:].split('^', 1)[0]}"
        return f"{label} ({target})" if label and label != target else target

    return html.unescape(_LINK.sub(unlink, text)).strip()


def file_kind(mime_type: str | None, subtype: str | None = None) -> AttachmentKind:
    return "voice" if subtype == "slack_audio" else kind_of(mime_type)


def _file(data: dict[str, Any]) -> FileRef:
    size = data.get("size")
    return FileRef(
        id=str(data.get("id") or ""),
        name=str(data.get("name") or data.get("title") or "file"),
        mime_type=data.get("mimetype"),
        size=size if isinstance(size, int) else None,
        url=data.get("url_private_download") or data.get("url_private"),
        subtype=data.get("subtype"),  # "slack_audio": a clip recorded in Slack
    )


def _time(ts: str) -> datetime:
    try:
        return datetime.fromtimestamp(float(ts), UTC)
    except ValueError:
        return datetime.now(UTC)
