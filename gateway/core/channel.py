"""What a channel adapter must provide, and the optional capabilities it may add.

A channel turns platform events into :class:`InboundMessage` (handing them to the sink it
gets at start) and delivers :class:`OutboundMessage`. Extras are separate protocols checked
with ``isinstance``, so the base stays small.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from gateway.core.bus import InboundSink
from gateway.core.messages import ChatRef, OutboundMessage


@dataclass(frozen=True, slots=True)
class ChannelHealth:
    connected: bool
    last_error: str | None = None
    last_message_at: float | None = None
    detail: str = ""


@runtime_checkable
class Channel(Protocol):
    name: str

    async def start(self, sink: InboundSink) -> None:
        """Connect and begin handing inbound messages to ``sink``; return once running."""

    async def stop(self) -> None:
        """Stop receiving; pending platform acknowledgements are settled first."""

    async def send(self, message: OutboundMessage) -> str | None:
        """Deliver one message; return the platform's message id(s) as a receipt.

        Raise :class:`gateway.core.errors.ChannelRateLimited`, ``ChannelTransientError`` or
        ``ChannelPermanentError`` so the outbox can decide what to do.
        """


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

    The gateway (gateway/runtime/drafts.py) decides when to show what; the channel only
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
