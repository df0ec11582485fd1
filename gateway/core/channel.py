"""What a channel adapter must provide, and the optional capabilities it may add.

A channel turns platform events into :class:`InboundMessage` (handing them to the sink it
gets at start) and delivers :class:`OutboundMessage`. Extras are separate protocols checked
with ``isinstance``, so the base stays small.
"""

from __future__ import annotations

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
class SupportsStreaming(Protocol):
    async def stream(self, chat: ChatRef, turn_id: str, delta: str) -> None:
        """Show a fragment of the answer being generated (not durable; the outbox follows)."""


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
