"""What channels see of the message bus.

Channels see only :class:`InboundSink`: ``publish_inbound`` returns after the message is
durable, and tells a duplicate apart, so an adapter acknowledges the platform only for
what is safely stored. The runtime's side (consuming inbound records, waiting for outbound
work) is :class:`gateway.runtime.bus.Bus`; a networked bus would implement the same
protocols, leaving channels and the agent untouched.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from gateway.core.messages import InboundMessage, OutboundMessage


class Accepted(enum.Enum):
    """What happened to a published inbound message."""

    NEW = "new"  # journaled; a turn will answer it
    DUPLICATE = "duplicate"  # seen before; nothing to do
    REFUSED = "refused"  # access policy said no; audited, no turn
    IGNORED = "ignored"  # group chatter not addressed to the bot; no turn

    # Every outcome is final: the adapter may acknowledge the platform for all of them.


class InboundSink(Protocol):
    async def publish_inbound(self, msg: InboundMessage) -> Accepted: ...

    async def admits(self, msg: InboundMessage) -> bool:
        """Whether ``msg`` would become a turn (no side effects). Channels use it to skip
        costly work (downloads, transcription) for messages that will be refused, or that
        were journaled before (a platform's redelivery)."""
        ...

    async def settled(self, channel: str) -> None:
        """Return once nothing ``channel`` handed in is waiting, running or unsent (bound
        it with ``asyncio.timeout``): ``switchboard chat -m`` waits so for its answer."""
        ...


@dataclass(frozen=True, slots=True)
class RecordedAnswer:
    """What the store holds of the answer to a journaled message
    (:meth:`ChannelRecords.answer_of`): for a channel that answers a waiting request (the
    API) and is asked for it again by a process that never saw the first request."""

    question: str  # the message's text, as journaled
    turn_id: str | None  # the turn that took it in (None: it waits for one)
    ended: bool  # that turn is committed: ``messages`` is all it sent to the chat
    failed: bool  # committed as failed: its last message is the notice that it could not answer
    messages: tuple[OutboundMessage, ...]  # what the turn queued for the message's chat, in order


class ChannelRecords(Protocol):
    """What a channel records besides messages (``StartContext.records``, given at start,
    :mod:`gateway.core.channel`): when people wrote and what became of sent messages (WhatsApp's window and reports), where
    its intake stopped (Matrix's sync token). Durable, and shared by a cluster's nodes."""

    async def heard_from(self, channel: str, chat_id: str) -> None:
        """The person of this direct chat just wrote (whether or not they are let in)."""

    async def last_heard(self, channel: str, chat_id: str) -> float | None:
        """When they last wrote (Unix time), or None when they never did."""

    async def delivery_report(
        self,
        channel: str,
        message_id: str,
        chat_id: str,
        status: str,
        error: str | None,
        *,
        tag: str | None = None,
    ) -> bool:
        """The platform's word on a sent message (sent, delivered, read, failed); returns
        whether it was news (redelivered webhooks repeat reports). ``tag``: what the channel
        attached to the send (WhatsApp's ``biz_opaque_callback_data``), kept with it."""

    async def reported(self, channel: str, tags: Sequence[str]) -> dict[str, str]:
        """The messages the platform reported on for each of ``tags`` (tag -> message id):
        how a channel whose sends cannot be read back finds what a lost send left."""

    async def tell_owner(self, channel: str, text: str, *, key: str, about: str) -> None:
        """Queue ``text`` for the owner (``key`` makes it once only); ``about`` is the chat
        the note concerns, which is never where it goes."""

    async def turn_of(self, channel: str, message_id: str) -> str | None:
        """The turn that took the channel's message ``message_id`` (its platform id) in, once
        one has: on whichever node of a cluster it runs, so a channel that waits for its
        answer knows which turn's messages answer it."""

    async def turn_failed(self, turn_id: str) -> bool:
        """Whether the turn failed (its model failed, it timed out or crashed): its notice
        says it could not answer, so a channel that answers a program (the API) answers
        with an error instead."""

    async def answer_of(self, channel: str, message_id: str) -> RecordedAnswer | None:
        """The answer to the channel's message ``message_id`` as far as the store has it
        (``None``: no such message in the journal): so a request asked again after a
        restart gets the answer of the turn that took it, sent or still to come."""

    async def load_cursor(self, channel: str) -> str | None:
        """Where the channel's intake stopped (Matrix: the ``/sync`` token), or None."""

    async def save_cursor(self, channel: str, cursor: str) -> None:
        """Store the intake's position; call it only once what came before is journaled."""


OWNER_NOTE = "owner-note:"  # idempotency keys of notes to the owner start with this


def is_owner_note(message: OutboundMessage) -> bool:
    """A note to the owner: when it fails in turn, nobody is told again (no loop)."""
    return message.idempotency_key.startswith(OWNER_NOTE)
