"""Typed messages that cross the bus: what a channel hands in, what the agent sends out.

Both are frozen, slotted dataclasses. The session key is derived from the platform
identity (channel, chat, thread) only; nothing the model says can choose it.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

from gateway.core.text.verbatim import fenced


class ChatType(enum.StrEnum):
    """Where a message was written; tool policy differs between them."""

    DM = "dm"
    GROUP = "group"
    CHANNEL = "channel"


class OutboundKind(enum.StrEnum):
    """Why a message is sent. Channels may render kinds differently."""

    REPLY = "reply"  # the final answer of a turn
    PROGRESS = "progress"  # interim text from the `message` or `notify` tool
    NOTICE = "notice"  # a failure or system notice (interrupted, provider down, ...)
    PROACTIVE = "proactive"  # heartbeat or scheduled-job output
    # What a stopped answer had written: kept where it was shown (its streamed draft, or
    # after the preview that showed it), marked as stopped; where nothing of it was shown,
    # not sent at all (gateway/runtime/outbound/attempt.py)
    STOPPED = "stopped"


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id() -> str:
    return uuid.uuid4().hex


AttachmentKind = Literal["image", "audio", "voice", "video", "document"]
ActionStyle = Literal["primary", "danger", ""]


def kind_of(mime_type: str | None) -> AttachmentKind:
    """What a file is, from its MIME type (a voice note is told apart by its platform)."""
    mime = (mime_type or "").split(";", 1)[0].strip().lower()
    if mime.startswith("image/"):
        return "image"
    if mime.startswith("audio/"):
        return "audio"
    if mime.startswith("video/"):
        return "video"
    return "document"


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file that came with a message or goes out with one.

    ``path`` is a local file (inside the data directory for inbound files, inside the
    workspace for outbound ones); ``platform_file_id`` lets a channel re-fetch it.
    """

    kind: AttachmentKind
    path: str | None = None
    mime_type: str | None = None
    filename: str | None = None
    size: int | None = None
    platform_file_id: str | None = None
    note: str | None = None  # e.g. a voice transcription, or why a file was not stored
    # A short document's text, read when it arrived: outside content, so a message that
    # carries one taints its turn (agent/context.py:user_message).
    text: str | None = None
    transcript: str | None = (
        None  # what a voice note or audio file says (gateway/runtime/intake/voice.py)
    )
    # A picture of a page of this document (a scan, which has no text to read): outside
    # content like a document's text, so it taints its turn too.
    page_of: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Attachment:
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return _shallow(self)


@dataclass(frozen=True, slots=True)
class Said:
    """Something said by someone else that comes with a message as context, never as the
    sender's own words: the message it replies to or quotes, a message it forwards, or a
    group message the bot was not addressed in. The model is told it is context, not
    instructions."""

    author: str  # a display name, as the platform showed it ("" when it does not say)
    text: str
    at: float | None = None  # when it was written (epoch seconds), if known
    by_bot: bool = False  # the bot's own earlier message
    # Where it was written, as far as the platform says: a channel or group's name, a link
    # to the original, an email's subject (a forward's origin; "" when unknown).
    where: str = ""

    def to_dict(self) -> dict[str, Any]:
        return _shallow(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Said:
        return cls(**data)


@dataclass(frozen=True, slots=True)
class ChatRef:
    """Enough to address a conversation on a platform."""

    channel: str
    chat_id: str
    thread_id: str | None = None

    @property
    def session_key(self) -> str:
        base = f"{self.channel}:{self.chat_id}"
        return f"{base}:{self.thread_id}" if self.thread_id else base


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """One message a person sent to the bot, as a channel adapter saw it."""

    channel: str
    chat_id: str
    sender_id: str
    text: str
    platform_message_id: str
    sender_name: str = ""
    chat_type: ChatType = ChatType.DM
    thread_id: str | None = None
    mentioned: bool = False  # addressed to the bot: mention, reply to the bot, or a command
    reply_to_message_id: str | None = None
    attachments: tuple[Attachment, ...] = ()
    received_at: datetime = field(default_factory=utcnow)
    edit_of: str | None = None  # an edit: the platform id of the message it changes
    # The agent a program asked for (a webhook's ``agent``, the API's ``model``); routes
    # decide for every other message. Set only by the gateway's own channels.
    agent: str | None = None
    # The text of the message this one replies to or quotes (Telegram reply or quote,
    # Discord reply, Slack thread parent), from the platform: there even after /new.
    quote: Said | None = None
    chat_name: str = ""  # the group's title or channel name, where the platform says it
    # Group messages of allowed senders since the bot was last addressed there, oldest
    # first; attached by the gateway (gateway.runtime.intake.group_context), never by a channel.
    context: tuple[Said, ...] = ()
    # What the sender passed on from elsewhere (a Telegram forward, a Discord forward's
    # snapshot, a Slack share, a forwarded email), with its origin: never the sender's own
    # words, which stay in ``text`` (their comment, or "" when they only forwarded).
    forwarded: tuple[Said, ...] = ()
    # Who the sender is across channels (gateway.runtime.people.directory), stamped by the
    # access gate, never by a channel, and journaled with the message so it joins the same
    # session after a restart: their person's key ("" : their address alone), the role
    # that person holds ("" : the channel's settings decide), and the session their direct
    # chats share on every channel ("person:<key>"; "" : the chat's own).
    person: str = ""
    person_role: str = ""
    conversation: str = ""
    # An event a program sent (a webhook delivery) rather than a line a person typed: it has
    # a turn of its own, never joined with the messages queued beside it nor taken into a
    # running turn (each delivery is acknowledged, and answered, as one).
    own_turn: bool = False

    @property
    def chat(self) -> ChatRef:
        return ChatRef(self.channel, self.chat_id, self.thread_id)

    @property
    def session_key(self) -> str:
        return self.chat.session_key

    @property
    def untrusted_context(self) -> bool:
        """Whether it carries words of others (group context, a quote not by the bot, a
        forward: even of the bot's own words, which come from a conversation whose outside
        content nobody here can see)."""
        return (
            bool(self.context)
            or bool(self.forwarded)
            or (self.quote is not None and not self.quote.by_bot)
        )

    @property
    def is_group(self) -> bool:
        return self.chat_type is not ChatType.DM

    @property
    def command(self) -> str | None:
        """The slash command this message starts with (``"/new"``), lower-cased."""
        if not self.text.startswith("/"):
            return None
        word = self.text.split(maxsplit=1)[0]
        return word.split("@", 1)[0].lower()

    def to_dict(self) -> dict[str, Any]:
        data = _shallow(self)  # not dataclasses.asdict: it deep-copies every value
        data["chat_type"] = self.chat_type.value
        data["received_at"] = self.received_at.isoformat()
        data["attachments"] = [a.to_dict() for a in self.attachments]
        data["quote"] = None if self.quote is None else self.quote.to_dict()
        data["context"] = [s.to_dict() for s in self.context]
        data["forwarded"] = [s.to_dict() for s in self.forwarded]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InboundMessage:
        data = dict(data)
        data["chat_type"] = ChatType(data.get("chat_type", "dm"))
        data["received_at"] = datetime.fromisoformat(data["received_at"])
        data["attachments"] = tuple(Attachment.from_dict(a) for a in data.get("attachments", ()))
        quote = data.get("quote")
        data["quote"] = None if quote is None else Said.from_dict(quote)
        data["context"] = tuple(Said.from_dict(s) for s in data.get("context", ()))
        data["forwarded"] = tuple(Said.from_dict(s) for s in data.get("forwarded", ()))
        return cls(**data)


@dataclass(frozen=True, slots=True)
class Action:
    """A button under a message. Pressing it sends ``command`` (``"/approve K7QW2M9P"``) as
    the presser's own message, so a press and the typed command take the same path (access
    gate, journal, command handler). Channels without buttons show only the text, which
    names the commands."""

    label: str
    command: str
    style: ActionStyle = ""  # how platforms with styles draw it


@dataclass(frozen=True, slots=True)
class OutboundMessage:
    """One message the gateway will deliver to a chat.

    ``idempotency_key`` makes enqueueing safe to repeat: the outbox stores each key once,
    so a resumed turn cannot queue the same answer twice. ``direct``: ``chat_id`` is a
    person's platform id, and the message goes to the direct chat with them (Telegram,
    Slack and email address a person's DM by their id; Discord opens the DM channel).
    """

    channel: str
    chat_id: str
    text: str
    thread_id: str | None = None
    kind: OutboundKind = OutboundKind.REPLY
    reply_to_message_id: str | None = None
    attachments: tuple[Attachment, ...] = ()
    turn_id: str | None = None
    idempotency_key: str = field(default_factory=new_id)
    actions: tuple[Action, ...] = ()  # buttons, where the platform has them
    direct: bool = False
    # ``text`` ends with this block as gateway.core.text.verbatim.fenced(verbatim), which every
    # markdown renderer shows as written; channels that can (Telegram: a ``pre`` entity by
    # offsets) show ``verbatim`` itself without any markdown. Approval prompts use it.
    verbatim: str = ""

    @property
    def chat(self) -> ChatRef:
        return ChatRef(self.channel, self.chat_id, self.thread_id)

    @classmethod
    def reply_to(
        cls,
        inbound: InboundMessage,
        text: str,
        *,
        kind: OutboundKind = OutboundKind.REPLY,
        turn_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> OutboundMessage:
        return cls(
            channel=inbound.channel,
            chat_id=inbound.chat_id,
            thread_id=inbound.thread_id,
            text=text,
            kind=kind,
            reply_to_message_id=inbound.platform_message_id if inbound.is_group else None,
            turn_id=turn_id,
            idempotency_key=idempotency_key or new_id(),
        )

    @property
    def prose(self) -> str | None:
        """``text`` without its verbatim block, or None when it has none (as sent)."""
        if not self.verbatim:
            return None
        block = "\n\n" + fenced(self.verbatim)
        return self.text.removesuffix(block) if self.text.endswith(block) else None

    def forwarded(self, chat: ChatRef, text: str, *, via: str) -> OutboundMessage:
        """This message passed on to ``chat`` with ``text`` (a webhook's or a task's, to the
        chat that gets its answers); keyed by ``via`` and its own key, so passing it on
        again queues nothing more."""
        return replace(
            self,
            channel=chat.channel,
            chat_id=chat.chat_id,
            thread_id=chat.thread_id,
            text=text,
            reply_to_message_id=None,
            direct=False,
            idempotency_key=f"{via}:{self.idempotency_key}",
        )

    def to_dict(self) -> dict[str, Any]:
        data = _shallow(self)
        data["kind"] = self.kind.value
        data["attachments"] = [a.to_dict() for a in self.attachments]
        data["actions"] = [_shallow(a) for a in self.actions]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OutboundMessage:
        data = dict(data)
        data["kind"] = OutboundKind(data.get("kind", "reply"))
        data["attachments"] = tuple(Attachment.from_dict(a) for a in data.get("attachments", ()))
        data["actions"] = tuple(Action(**a) for a in data.get("actions", ()))
        return cls(**data)


def _shallow(obj: Any) -> dict[str, Any]:
    """A slotted dataclass's fields as a dict, values as they are (all immutable here)."""
    return {name: getattr(obj, name) for name in obj.__slots__}
