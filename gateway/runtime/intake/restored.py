"""The first start of a restored copy: what was open in it is told, never answered twice.

A copy (``switchboard backup``, the copy before a migration) is taken while the gateway
runs: messages wait in its journal and turns run in it. The original went on after the copy
was taken, and answered most of them, streamed drafts finished included; resumed from the
copy they would be answered a second time, or their finished answers edited back into a
draft and streamed again. Yet the original may have died before answering some. So neither:
each chat with open work in the copy gets one notice naming its messages and when the copy
was taken, asking to send again what got no answer; their turns end, their drafts are
forgotten without being touched. A turn that waits for an approval stays parked (the owner
decides again). The copy's mark (:data:`COPY_TAKEN_KEY`) goes in the same transaction, so a
crash in between repeats nothing: the next start sees the same copy.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, tzinfo

from gateway.core.addressing import INTERNAL_CHANNELS
from gateway.core.messages import InboundMessage, OutboundKind, OutboundMessage
from gateway.store import InboundRecord, Store
from gateway.store.engine.integrity import COPY_TAKEN_KEY

log = logging.getLogger(__name__)

QUOTED = 60  # characters of each message the notice names
NAMED = 3  # messages named per chat, at most


async def settle_restored_copy(store: Store, zone: tzinfo) -> int:
    """Settle a restored copy's open work (see the module); how many messages it held."""
    taken = await store.kv.get(COPY_TAKEN_KEY)
    if taken is None:
        return 0
    work = await store.journal.open_work()
    parked = {request.turn_id for request in await store.approval_requests.pending()}
    turns = [turn for turn in work.running if turn.id not in parked]
    records = [*work.pending, *(record for turn in turns for record in turn.records)]
    when = datetime.fromtimestamp(float(taken), zone)
    notices = [notice(chat, when) for chat in by_chat(records)]
    await store.settle_copy(turns=turns, records=work.pending, notices=notices)
    log.warning(
        "this store is a copy taken at %s: %d message(s) open in it were not answered again "
        "(the original went on with them); %d chat(s) were told",
        when.isoformat(timespec="seconds"),
        len(records),
        len(notices),
    )
    return len(records)


def by_chat(records: Sequence[InboundRecord]) -> list[list[InboundMessage]]:
    """The messages people sent (not the gateway's own turns), grouped by their chat."""
    chats: dict[str, list[InboundMessage]] = {}
    for record in records:
        message = record.message
        if message.channel not in INTERNAL_CHANNELS:
            chats.setdefault(message.chat.session_key, []).append(message)
    return list(chats.values())


def notice(messages: Sequence[InboundMessage], taken: datetime) -> OutboundMessage:
    said = [_quoted(m.text) for m in messages[:NAMED] if m.text.strip()]
    more = len(messages) - len(said)
    named = ", ".join(said) + (f" and {more} more" if said and more > 0 else "")
    what = f"your message {named}" if len(messages) == 1 and said else f"your messages {named}"
    if not said:
        what = "your last message" if len(messages) == 1 else f"your last {len(messages)} messages"
    text = (
        f"I was restored from a copy taken {taken:%Y-%m-%d %H:%M %Z}, while I was answering "
        f"{what}. My answer may not have reached you; if it did not, please send it again."
    )
    return OutboundMessage.reply_to(messages[-1], text, kind=OutboundKind.NOTICE)


def _quoted(text: str) -> str:
    line = " ".join(text.split())
    return f"“{line[:QUOTED]}…”" if len(line) > QUOTED else f"“{line}”"
