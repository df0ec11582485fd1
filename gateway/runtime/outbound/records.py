"""What channels record beyond messages (:class:`gateway.core.bus.ChannelRecords`): when a
person last wrote, the platform's delivery reports, and notes to the owner.

A note to the owner is how a failure a person cannot see becomes visible: WhatsApp refuses
free text outside its 24-hour window, and a message the platform reports as failed would
otherwise be a silent loss. The note goes to the owners listed for the same channel
(never to the chat it is about), else to the owners of the other channels, as a notice in
the outbox: once per ``key``, however often the platform repeats itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from gateway.config.channels import ChannelSection
from gateway.core.bus import OWNER_NOTE, RecordedAnswer
from gateway.core.messages import OutboundKind, OutboundMessage
from gateway.store import Deliveries, Journal, KeyValue, Outbox
from gateway.store.deliveries import DELIVERY_STATES

log = logging.getLogger(__name__)

CURSOR = "cursor:"  # the key prefix of intake positions in the store's key-value table


class StoredRecords:
    """The store's side of :class:`gateway.core.bus.ChannelRecords`: what channels record
    beyond messages, kept in the journal's database (shared by a cluster's nodes)."""

    def __init__(
        self,
        deliveries: Deliveries,
        kv: KeyValue,
        outbox: Outbox,
        journal: Journal,
        sections: Mapping[str, ChannelSection],
        *,
        on_outbound: Callable[[str], None],
    ) -> None:
        self._deliveries = deliveries
        self._kv = kv
        self._outbox = outbox
        self._journal = journal
        self._sections = sections
        self._on_outbound = on_outbound

    async def heard_from(self, channel: str, chat_id: str) -> None:
        await self._deliveries.heard_from(channel, chat_id)

    async def last_heard(self, channel: str, chat_id: str) -> float | None:
        return await self._deliveries.last_heard(channel, chat_id)

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
        state = DELIVERY_STATES.get(status)
        if state is None:
            return False
        return await self._deliveries.record(channel, message_id, chat_id, state, error, tag=tag)

    async def reported(self, channel: str, tags: Sequence[str]) -> dict[str, str]:
        return await self._deliveries.tagged(channel, tags)

    async def turn_of(self, channel: str, message_id: str) -> str | None:
        found = await self._journal.find(channel, message_id)
        return None if found is None else found[2]

    async def turn_failed(self, turn_id: str) -> bool:
        return await self._journal.failed(turn_id)

    async def answer_of(self, channel: str, message_id: str) -> RecordedAnswer | None:
        message = await self._journal.message(channel, message_id)
        found = await self._journal.find(channel, message_id)
        if message is None or found is None:
            return None
        turn = found[2]
        if turn is None:
            return RecordedAnswer(message.text, None, ended=False, failed=False, messages=())
        # the turn's state first: once committed, every message of it is in the outbox
        ended = await self._journal.finished(turn)
        failed = ended and await self._journal.failed(turn)
        sent = await self._outbox.of_turn(channel, message.chat.session_key, turn)
        return RecordedAnswer(message.text, turn, ended, failed, tuple(sent))

    async def tell_owner(self, channel: str, text: str, *, key: str, about: str) -> None:
        targets = self._owners(channel, about)
        if not targets:
            log.warning("%s: no owner to tell (set %s.owners): %s", channel, channel, text)
            return
        notes = [
            OutboundMessage(
                channel=name,
                chat_id=owner,
                text=text,
                kind=OutboundKind.NOTICE,
                idempotency_key=f"{OWNER_NOTE}{key}:{name}:{owner}",
                direct=True,
            )
            for name, owner in targets
        ]
        if await self._outbox.enqueue(notes):
            for name in {name for name, _ in targets}:
                self._on_outbound(name)

    async def load_cursor(self, channel: str) -> str | None:
        value = await self._kv.get(f"{CURSOR}{channel}")
        return value if isinstance(value, str) else None

    async def save_cursor(self, channel: str, cursor: str) -> None:
        await self._kv.set(f"{CURSOR}{channel}", cursor)

    def _owners(self, channel: str, about: str) -> list[tuple[str, str]]:
        """The same channel's owners (not the chat the note is about), else everyone's."""
        own = self._sections.get(channel)
        here = [(channel, o) for o in (own.owners if own else ()) if o != about]
        if here:
            return here
        return [
            (name, owner)
            for name, section in self._sections.items()
            if name != channel and _enabled(section)
            for owner in section.owners
        ]


def _enabled(section: ChannelSection) -> bool:
    try:
        return bool(section.enabled)
    except NotImplementedError:
        return False
