"""Pure conversion of a WhatsApp webhook body into what the channel acts on (no I/O).

A POST holds ``entry[].changes[].value`` objects; each has ``metadata.phone_number_id``
(only ours are read: one business account may have several numbers), ``contacts`` (the
sender's profile name), ``messages`` and ``statuses``.

* Every chat is a direct chat with one person: ``chat_id`` and ``sender_id`` are the
  person's WhatsApp id (``wa_id``, their number with country code, no ``+``), which never
  changes with their profile name. ``platform_message_id`` is the message id (``wamid.…``),
  the same in every redelivery, so the journal keeps one copy.
* Text, a button's or list's reply, and captions are the text; images, stickers, voice
  notes, audio, video and documents are files to fetch (:class:`MediaRef`); a location and
  shared contacts become text. A forwarded message's text is someone else's
  (``InboundMessage.forwarded``, from ``context.forwarded``), never the sender's own. A
  reply keeps the id of the message it answers; a reaction is not a message
  (:class:`Reaction`): it is context for the person's next message.
* ``statuses`` report on messages we sent: sent, delivered, read, or failed with Meta's
  error code (:class:`StatusReport`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gateway.core.messages import AttachmentKind, ChatType, InboundMessage, Said

CHANNEL = "whatsapp"
_MEDIA: dict[str, AttachmentKind] = {
    "image": "image",
    "sticker": "image",
    "video": "video",
    "document": "document",
}


@dataclass(frozen=True, slots=True)
class MediaRef:
    media_id: str
    kind: AttachmentKind
    mime_type: str | None
    filename: str | None


@dataclass(frozen=True, slots=True)
class Converted:
    message: InboundMessage
    media: tuple[MediaRef, ...] = ()


@dataclass(frozen=True, slots=True)
class StatusReport:
    message_id: str
    recipient: str
    status: str  # sent | delivered | read | failed
    error_code: int = 0
    error_text: str = ""
    tag: str | None = None  # the biz_opaque_callback_data the send carried (our part's tag)


@dataclass(frozen=True, slots=True)
class Reaction:
    sender: str
    message_id: str  # the message reacted to
    emoji: str  # "" when a reaction was taken back


@dataclass(slots=True)
class Batch:
    messages: list[Converted] = field(default_factory=list)
    statuses: list[StatusReport] = field(default_factory=list)
    reactions: list[Reaction] = field(default_factory=list)
    senders: list[str] = field(default_factory=list)  # everyone who wrote, in order


def parse(body: Any, phone_number_id: str) -> Batch:
    """What a webhook body holds for our number; anything unreadable is left out."""
    batch = Batch()
    if not isinstance(body, dict):
        return batch
    for entry in _dicts(body.get("entry")):
        for change in _dicts(entry.get("changes")):
            value = change.get("value")
            if change.get("field") != "messages" or not isinstance(value, dict):
                continue
            metadata = value.get("metadata") or {}
            if str(metadata.get("phone_number_id") or "") != phone_number_id:
                continue
            names = {
                str(c.get("wa_id")): str((c.get("profile") or {}).get("name") or "")
                for c in _dicts(value.get("contacts"))
            }
            for raw in _dicts(value.get("messages")):
                _message(raw, names, batch)
            batch.statuses.extend(
                report for raw in _dicts(value.get("statuses")) if (report := _status(raw))
            )
    return batch


def _message(raw: dict[str, Any], names: dict[str, str], batch: Batch) -> None:
    sender, wamid, kind = raw.get("from"), raw.get("id"), raw.get("type")
    if not (isinstance(sender, str) and sender and isinstance(wamid, str) and wamid):
        return
    batch.senders.append(sender)
    if kind == "reaction":
        reaction = raw.get("reaction") or {}
        target = reaction.get("message_id")
        if isinstance(target, str):
            batch.reactions.append(Reaction(sender, target, str(reaction.get("emoji") or "")))
        return
    text, media = _content(kind, raw)
    if not text and not media:
        return  # unsupported, system, a deleted message: nothing to answer
    context = raw.get("context") or {}
    reply_to = context.get("id") if isinstance(context.get("id"), str) else None
    # A forward: WhatsApp says only that it is one (``frequently_forwarded``: passed on
    # many times), never by whom or when it was written, and the forwarder adds no words.
    forward = bool(context.get("forwarded") or context.get("frequently_forwarded"))
    message = InboundMessage(
        channel=CHANNEL,
        chat_id=sender,
        sender_id=sender,
        sender_name=names.get(sender, ""),
        text="" if forward else text,
        platform_message_id=wamid,
        chat_type=ChatType.DM,
        mentioned=True,
        reply_to_message_id=reply_to,
        received_at=_time(raw.get("timestamp")),
        forwarded=(Said("", text or "[a file without text]"),) if forward else (),
    )
    batch.messages.append(Converted(message, media))


def _content(kind: Any, raw: dict[str, Any]) -> tuple[str, tuple[MediaRef, ...]]:
    part = raw.get(kind) if isinstance(kind, str) else None
    part = part if isinstance(part, dict) else {}
    if kind == "text":
        return str(part.get("body") or "").strip(), ()
    if kind in _MEDIA or kind == "audio":
        media_id = part.get("id")
        if not isinstance(media_id, str):
            return "", ()
        media_kind = (
            ("voice" if part.get("voice") else "audio") if kind == "audio" else _MEDIA[kind]
        )
        ref = MediaRef(media_id, media_kind, part.get("mime_type"), part.get("filename"))
        return str(part.get("caption") or "").strip(), (ref,)
    if kind == "location":
        return _location(part), ()
    if kind == "contacts":
        cards = [_contact(c) for c in _dicts(raw.get("contacts"))]
        return "\n".join(card for card in cards if card), ()
    if kind == "interactive":
        reply = part.get("button_reply") or part.get("list_reply") or {}
        return str(reply.get("title") or "").strip(), ()
    if kind == "button":
        return str(part.get("text") or "").strip(), ()
    return "", ()


def _location(part: dict[str, Any]) -> str:
    lat, lon = part.get("latitude"), part.get("longitude")
    if lat is None or lon is None:
        return ""
    where = ", ".join(str(part[k]) for k in ("name", "address") if part.get(k))
    text = f"[shared a location: {lat}, {lon}"
    return text + (f" ({where})]" if where else "]")


def _contact(card: dict[str, Any]) -> str:
    name = str((card.get("name") or {}).get("formatted_name") or "").strip()
    phones = [str(p.get("phone") or p.get("wa_id") or "") for p in _dicts(card.get("phones"))]
    emails = [str(e.get("email") or "") for e in _dicts(card.get("emails"))]
    details = ", ".join(item for item in (*phones, *emails) if item)
    if not (name or details):
        return ""
    return f"[shared a contact: {name or 'unnamed'}" + (f", {details}]" if details else "]")


def _status(raw: dict[str, Any]) -> StatusReport | None:
    message_id, status = raw.get("id"), raw.get("status")
    if not (isinstance(message_id, str) and status in ("sent", "delivered", "read", "failed")):
        return None
    code, text = 0, ""
    for error in _dicts(raw.get("errors")):
        code = int(error.get("code") or 0)
        details = (error.get("error_data") or {}).get("details")
        text = str(details or error.get("message") or error.get("title") or "")
        break
    tag = raw.get("biz_opaque_callback_data")
    return StatusReport(
        message_id,
        str(raw.get("recipient_id") or ""),
        status,
        code,
        text,
        tag if isinstance(tag, str) and tag else None,
    )


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _time(value: Any) -> datetime:
    try:
        return datetime.fromtimestamp(int(value), UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return datetime.now(UTC)
