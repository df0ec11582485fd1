"""What channels see of the message bus.

Channels see only :class:`InboundSink`: ``publish_inbound`` returns after the message is
durable, and tells a duplicate apart, so an adapter acknowledges the platform only for
what is safely stored. The runtime's side (consuming inbound records, waiting for outbound
work) is :class:`gateway.runtime.local_bus.Bus`; a networked bus would implement the same
protocols, leaving channels and the agent untouched.
"""

from __future__ import annotations

import enum
from typing import Protocol

from gateway.core.messages import InboundMessage


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
