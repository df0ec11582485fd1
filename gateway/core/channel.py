"""What a channel adapter must provide, and the optional capabilities it may add.

A channel turns platform events into :class:`InboundMessage` (handing them to the sink of
the :class:`StartContext` it gets at start) and delivers :class:`OutboundMessage`. Extras
are separate protocols checked with ``isinstance``, so the base stays small.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import tzinfo
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from gateway.core.bus import ChannelRecords, InboundSink
from gateway.core.messages import ChatRef, ChatType, OutboundMessage
from gateway.core.system.connections import ConnectionLimits


@dataclass(frozen=True, slots=True)
class ChannelHealth:
    connected: bool
    last_error: str | None = None
    last_message_at: float | None = None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class ChannelContext:
    """What a channel knows of the configuration besides its own section (given when it is
    built: ``gateway.config.plugins.ChannelPlugin.create``)."""

    data_dir: Path  # its state files go in data_dir / "channels"
    workspace_dir: Path  # inbound files go in workspace_dir / "attachments" / <channel>
    agent_name: str  # the assistant's name, where the platform shows a sender's name
    web_server: bool  # whether the web server runs (where webhooks are served)
    zone: tzinfo  # the owner's time zone (user.timezone): a time given without a zone is theirs
    # what an HTTP server of the channel's own holds ([limits] http_*): Slack's, Telegram's
    connection_limits: ConnectionLimits = field(default_factory=ConnectionLimits)


@dataclass(frozen=True, slots=True)
class StartContext:
    """What a channel gets from the gateway when it starts."""

    sink: InboundSink  # where messages go: returns once they are journaled (or refused)
    records: ChannelRecords  # what the channel records besides messages (windows, cursors)


@runtime_checkable
class Channel(Protocol):
    name: str

    async def start(self, context: StartContext) -> None:
        """Connect and begin handing inbound messages to ``context.sink``; return once
        running."""

    async def stop(self) -> None:
        """Stop receiving; pending platform acknowledgements are settled first."""

    async def send(self, message: OutboundMessage) -> str | None:
        """Deliver one message; return the platform's message id(s) as a receipt.

        May be called before :meth:`start` (the outbox sends what the last run left while
        the channels connect: a send that cannot work yet raises ``ChannelTransientError``
        and is tried again) and after :meth:`stop` (the turns that drain at shutdown send
        their answers). So what a send needs that the channel keeps on disk (an email
        thread's subject) is read on first need, not only at start.

        Raise :class:`gateway.core.errors.ChannelRateLimited`, ``ChannelTransientError`` or
        ``ChannelPermanentError`` so the outbox can decide what to do.
        """


@dataclass(frozen=True, slots=True)
class DirectoryEntry:
    """A chat the bot is in, by name: what lets "post in #general" find its id."""

    chat_id: str
    name: str  # as people call it: "#general", "#general (Server)", a group's title
    kind: ChatType = ChatType.GROUP


@runtime_checkable
class SupportsDirectory(Protocol):
    async def directory(self) -> Sequence[DirectoryEntry]:
        """The chats the bot is in on this platform, with their names, from the platform
        (Slack's channel list, Discord's servers). Raise ``ChannelTransientError`` when the
        platform cannot be asked now. Platforms that cannot list their chats (Telegram)
        leave this out: the gateway knows their groups from the messages that came."""


@runtime_checkable
class SupportsTyping(Protocol):
    async def typing(self, chat: ChatRef) -> None:
        """Show a "typing" indicator once; the gateway repeats it while a turn runs."""


@runtime_checkable
class SupportsHealth(Protocol):
    def health(self) -> ChannelHealth: ...


@runtime_checkable
class SupportsCounts(Protocol):
    def counts(self) -> Mapping[tuple[str, str], int]:
        """Requests since the start by (what, outcome): a webhook's deliveries by hook, the
        API's requests by endpoint (``/metrics``)."""


@runtime_checkable
class SupportsStreaming(Protocol):
    async def stream(self, chat: ChatRef, turn_id: str, delta: str) -> None:
        """Show a fragment of the answer being generated (not durable; the outbox follows)."""


@runtime_checkable
class SupportsDrafts(Protocol):
    """Streaming by editing: the answer grows in a message of its own as the model writes.

    The gateway (gateway/runtime/outbound/drafts.py) decides when to show what; the channel only
    knows its platform: how a text splits into its messages, how often one chat may be
    edited, and how to post, edit and delete a draft. The outbox's final message is then
    delivered by :meth:`finish_drafts`, which turns the drafts into the formatted answer.
    """

    draft_interval: float  # seconds between two edits of a chat's draft

    def draft_parts(self, text: str) -> list[str]:
        """The messages a draft of ``text`` (markdown, maybe unfinished) takes, in order;
        deterministic, so a part already shown is recognised when the text grows."""

    async def post_draft(self, chat: ChatRef, text: str, *, reply_to: str | None) -> str:
        """Post one draft message; returns its platform id. Errors as for ``send``."""

    async def edit_draft(self, chat: ChatRef, message_id: str, text: str) -> None:
        """Replace a draft message's text (unformatted: the final edit formats)."""

    async def delete_draft(self, chat: ChatRef, message_id: str) -> None:
        """Remove a draft message nobody needs any more (already gone: fine)."""

    async def finish_drafts(self, message: OutboundMessage, drafts: Sequence[str]) -> str | None:
        """Deliver ``message`` into the draft messages ``drafts`` (platform ids, in order):
        edit them to the formatted parts, post the parts (and files) beyond them, delete the
        drafts left over. Safe to repeat after a failure or a crash. Returns the receipt
        like ``send``."""


@runtime_checkable
class SupportsDraftPreview(Protocol):
    """A preview of the answer being written that is not a message (Telegram's
    ``sendMessageDraft`` in private chats): the platform shows it until the answer is sent
    and then drops it, so there is nothing to record, finish or delete, and a crash leaves
    nothing behind. Where the platform refuses it, streaming falls back to
    :class:`SupportsDrafts` (editing a message)."""

    def previews_in(self, chat: ChatRef, *, group: bool) -> bool:
        """Whether ``chat`` can show previews (not refused so far)."""

    async def preview_draft(self, chat: ChatRef, preview_id: int, text: str) -> None:
        """Show ``text`` (plain) as the preview ``preview_id`` (non-zero; the same id for one
        answer, so the platform animates the change). Raises ``ChannelPermanentError`` when
        the platform refuses previews; after that :meth:`previews_in` says no."""


@dataclass(frozen=True, slots=True)
class SendAttempt:
    """A send (or a draft post) whose outcome was never recorded: the process died while
    it was on its way, or the platform's answer was lost."""

    at: float  # wall-clock time it began
    mark: str | None = None  # what the channel noted before it (:meth:`SupportsResend.send_mark`)
    draft: bool = False  # a streamed draft's post, not the message itself

    def to_dict(self) -> dict[str, object]:
        return {"at": self.at, "mark": self.mark, "draft": self.draft}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> SendAttempt:
        at, mark = data.get("at"), data.get("mark")
        return cls(
            float(at) if isinstance(at, int | float) else 0.0,
            None if mark is None else str(mark),
            bool(data.get("draft")),
        )


@dataclass(frozen=True, slots=True)
class KnownMessage:
    """A platform message the store has a record of (a delivered message, a draft, a
    message a person sent): never the one a lost send may have left."""

    chat_id: str
    message_id: str
    at: float  # when it was recorded (it existed by then)
    answered: bool = False  # a message the lost send's turn answers: older than its attempts


@dataclass(frozen=True, slots=True)
class LostSend:
    """What a channel needs to deliver a message whose earlier attempts left no record.

    ``attempts``: the sends and draft posts whose outcome is unknown, oldest first.
    ``drafts``: the platform ids of the turn's recorded draft messages, in order (the answer
    is delivered into them, as :meth:`SupportsDrafts.finish_drafts` does). ``known``: the
    messages of this channel the store recorded around those attempts (other answers, other
    turns' drafts, the messages this turn answers), so they are never taken for this one.
    """

    message: OutboundMessage
    attempts: tuple[SendAttempt, ...]
    drafts: tuple[str, ...] = ()
    known: tuple[KnownMessage, ...] = ()

    @property
    def since(self) -> float:
        """When the first of the lost attempts began."""
        return min((a.at for a in self.attempts), default=0.0)


@runtime_checkable
class SupportsResend(Protocol):
    """Exactly once across a crash in the middle of a send.

    A send and the record of its result cannot be one transaction. So the outbox records
    each attempt before the platform call (with :meth:`send_mark`) and its result the moment
    it returns; an attempt whose result was never recorded makes every later attempt a
    :meth:`resend`: the channel finds out, the platform's way, what the lost attempts left
    and completes the message from there (docs/reliability.md has each platform's rule).
    """

    def send_mark(self, chat: ChatRef) -> str | None:
        """What the channel must know later to find a message this send (or draft post) to
        ``chat`` may create; stored durably before the call, handed back in the
        :class:`SendAttempt`. ``None``: nothing beyond the time."""

    async def resend(self, lost: LostSend) -> str | None:
        """Deliver ``lost.message`` so that the chat shows it exactly once, whatever the
        lost attempts did: parts that arrived count as sent (or are edited into the message),
        stray drafts are edited into it or deleted, the rest is posted. Safe to repeat.
        Returns the receipt and raises like ``send``."""


@dataclass(frozen=True, slots=True)
class TurnActivity:
    """What a running turn is doing, for channels that show it live (the terminal chat)."""

    kind: Literal["started", "tool"]
    detail: str = ""  # started: the question (the turn's last message); tool: the tool's name
    resumed: bool = False  # started: a turn cut by a stop or crash continues
    message_ids: tuple[str, ...] = ()  # started: platform ids of the messages it answers


@runtime_checkable
class SupportsActivity(Protocol):
    async def activity(self, chat: ChatRef, turn_id: str, activity: TurnActivity) -> None:
        """A turn for ``chat`` started (or resumed) or is about to run a tool. Cosmetic:
        not durable, and a failure here never fails the turn."""


@runtime_checkable
class SupportsTurnEnd(Protocol):
    async def turn_ended(self, chat: ChatRef, turn_id: str, *, answered: bool) -> None:
        """The turn for ``chat`` is committed: stop showing progress for it.

        ``answered``: a reply or failure notice for this chat is in the outbox (it may be
        delivered after this call); when false, text streamed for the turn will never be
        replaced by an answer and should go.
        """


@runtime_checkable
class SupportsProbe(Protocol):
    async def probe(self) -> str:
        """Check the credentials against the platform without starting the channel.

        No polling, no websocket, no IDLE: one or two API calls that prove the platform
        accepts us (``switchboard doctor`` runs this). Return who we are there, in a few
        words ("@switchboard_bot"). Raise :class:`gateway.core.errors.ChannelPermanentError` when
        the credentials are refused (naming the setting to fix) and ``ChannelTransientError``
        when the platform cannot be reached or answers 5xx.
        """


@runtime_checkable
class ReceivesOnEveryNode(Protocol):
    """A channel whose whole intake is self-authenticated HTTP requests on this server.

    Nothing it receives depends on the node: a request is checked, then journaled in the
    shared store (deduplicated there by its platform id), and the node that runs the session
    answers it through the leader's outbox. So a cluster node that does not lead starts it,
    and serves its routes, before it waits for the lead (gateway/runtime/app.py). Its
    ``send`` is still called only on the leader.
    """

    receives_on_every_node: bool
