"""One delivery attempt of an outbox message: recorded before, sent (or resent), returned.

The rule that makes a crash at any instant harmless (gateway/store/outbox.py has the states):

1. Before the platform call, the attempt is recorded durably: the row becomes ``sending``
   with the attempt (its time and the channel's :meth:`~SupportsResend.send_mark`). In a
   cluster the same transaction checks that this node still leads (``fence``); a node that
   does not lead any more never sends.
2. The call: a first attempt sends (or finishes the turn's streamed draft, all but the
   retired messages of an earlier claim, deleted after it: gateway/store/drafts.py); a row that
   already has an attempt of unknown outcome, or whose draft has a post whose id was lost,
   is *resent*: the channel finds out what those attempts left and completes the message
   from there (:class:`~gateway.core.channel.LostSend`; per platform in
   docs/reliability.md). Channels that cannot find out (the web chat, the terminal: their
   transcript is the message) simply send again. What a stopped answer had written
   (``OutboundKind.STOPPED``) finishes its draft, follows its preview, or, where nothing of
   it was shown, is not sent at all.
3. The worker records the result the moment the call returns (ahead of other store writes).

An attempt made by another process (one that died, or a cluster leader that lost its lead)
may still be on the wire when its row is found: the resend waits until :data:`GRACE`
seconds after that attempt began, so that the platform has it before we look.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway.core.channel import Channel, LostSend, SendAttempt, SupportsResend
from gateway.core.messages import OutboundKind
from gateway.runtime.outbound.drafts import KNOWN_LOOKBACK, DraftStreamer
from gateway.store import Outbox, OutboxRecord
from gateway.store.drafts import DraftMessages
from gateway.store.outbox import Fence

GRACE = 2.0  # seconds: a request a dead process had on the wire has reached the platform

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class Delivered:
    receipt: str | None
    finished_draft: str | None  # the turn whose streamed draft became the message


class Delivery:
    """Delivers outbox rows through one channel, one attempt at a time per row."""

    def __init__(
        self,
        channel: Channel,
        outbox: Outbox,
        *,
        drafts: DraftStreamer,
        fence: Fence | None,
        clock: Clock = time.time,
        grace: float = GRACE,
    ) -> None:
        self.channel = channel
        self._outbox = outbox
        self._drafts = drafts
        self._fence = fence
        self._clock = clock
        self._grace = grace
        self._own: set[int] = set()  # rows this process tried: no attempt of theirs in flight

    async def attempt(self, record: OutboxRecord) -> Delivered | None:
        """One attempt at ``record``; ``None`` when this process may not send it (it does
        not lead any more, or the row was settled meanwhile). Raises the channel's errors."""
        message = record.message
        drafting = self._drafts.drafting(message)
        stored = DraftMessages()
        previewed = False
        if drafting is not None and message.turn_id is not None:
            previewed = self._drafts.previewed(message.chat, message.turn_id)
            stored = await self._drafts.close(message.chat, message.turn_id)
        shown = stored.ids or stored.lost or stored.retired or previewed
        if message.kind is OutboundKind.STOPPED and not shown:
            # nothing of the stopped answer was shown here: nothing to keep (the web chat
            # keeps what it streamed itself); recorded as done, and never sent
            return await self._skipped(record)
        earlier = record.open_sends if record.lost else ()
        lost = (*earlier, *stored.lost)
        if lost and record.id not in self._own:  # maybe another process's: let it land first
            wait = max(a.at for a in lost) + self._grace - self._clock()
            if wait > 0:
                await asyncio.sleep(wait)
        channel = self.channel
        mark = channel.send_mark(message.chat) if isinstance(channel, SupportsResend) else None
        self._own.add(record.id)
        marked = await self._outbox.mark_sending(
            record.id, SendAttempt(self._clock(), mark), fence=self._fence
        )
        if marked is None:
            return None
        finished = message.turn_id if stored.ids or stored.lost or stored.retired else None
        if lost and isinstance(channel, SupportsResend):
            since = min(a.at for a in lost) - KNOWN_LOOKBACK
            known = await self._outbox.known(channel.name, since=since, turn_id=message.turn_id)
            receipt = await channel.resend(LostSend(message, lost, stored.ids, tuple(known)))
        elif stored.ids and drafting is not None:
            receipt = await drafting.finish_drafts(message, stored.ids)
        else:
            receipt = await channel.send(message)
        if stored.retired:
            # drafts a node that lost the session may still edit: the answer went apart
            await self._drafts.discard(message.chat, stored.retired)
        return Delivered(receipt, finished)

    async def _skipped(self, record: OutboxRecord) -> Delivered | None:
        """Settle ``record`` without a platform call, under the same fence as a send (a node
        that does not lead leaves it alone); a crash before it is recorded skips it again."""
        marked = await self._outbox.mark_sending(
            record.id, SendAttempt(self._clock(), None), fence=self._fence
        )
        return None if marked is None else Delivered(None, None)

    def forget(self, record_id: int) -> None:
        """The row is settled (sent or given up)."""
        self._own.discard(record_id)
