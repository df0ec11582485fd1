"""What a lost send left in a Telegram chat: the probing rule.

A send and the record of its result cannot be one transaction, and the Bot API cannot read
a chat back. When the outcome of a send (or of a streamed draft's post) was lost, the
messages it may have made are found by probing message ids, relying on two facts:

* **Ids are sequential per id space.** Every supergroup and channel (ids ``-100…``) numbers
  its messages with a counter of its own; all private chats and basic groups of the bot
  share the bot's one counter (so there, ids of other chats interleave). A message made by
  an attempt has a higher id than every message that existed when the attempt began.
* **``editMessageReplyMarkup`` without buttons tells whose a message is** and changes
  nothing on a message without buttons: "message is not modified" (or a change) for the
  bot's own message in that chat, "message can't be edited" for someone else's, "message to
  edit not found" where that chat has no such message (never made, another chat's, deleted).

**The rule.** For each lost attempt, the *floor* is the highest id known to exist in the
chat's id space before the attempt began: the highest id this channel had seen there when
the attempt was recorded (its mark, :meth:`MessageIds.mark`), the messages the turn answers,
and whatever the store recorded in that space before the attempt (less
:data:`CLOCK_SKEW`). The ids above the floor are probed in order, skipping ids the store
knows (other answers, other drafts, this turn's own drafts), until :data:`PROBE_WINDOW` ids
were probed. Every id that is the bot's own message in the chat is one the gateway left
unrecorded: a part of this message that arrived, or a draft post whose id was lost (the
gateway records every other message it sends). The message is then delivered into them
(:meth:`Sender.redeliver <channels.telegram.sender.Sender.redeliver>`): each part edits one
("not modified" where it already shows it), the rest is sent, the ones left over are
deleted. At most ``PROBE_WINDOW`` calls per lost attempt, :data:`PROBE_BATCH` at a time.

**Where it cannot decide** (the message may then show twice): an attempt with no floor at
all (nothing seen in that space since the start, nothing recorded, not a reply); more than
``PROBE_WINDOW`` messages unknown to the store made in the id space between the floor and
the message (in private chats: all of the bot's private chats and small groups together);
a message the person deleted in between (it is sent again: they see it once more); a
request that reaches Telegram later than the outbox's grace after its process died. An
unrecorded message of the bot in the window that is none of these (none exists unless
another program uses the same token) would be taken into the message.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable, Iterable

from channels.telegram.convert import telegram_message_id
from gateway.core.channel import KnownMessage, LostSend, SendAttempt

log = logging.getLogger(__name__)

PROBE_WINDOW = 30  # ids unknown to the store probed above each lost attempt's floor
PROBE_BATCH = 5  # probes in flight at once
CLOCK_SKEW = 5.0  # seconds: a record counts as older than an attempt only by this margin

IsOurs = Callable[[str, int], Awaitable[bool]]  # (chat id, message id) -> the bot's own?


def id_space(chat_id: str | int) -> str:
    """The counter a chat's message ids come from: its own (supergroups, channels) or the
    bot's (private chats and basic groups)."""
    text = str(chat_id)
    return text if text.startswith("-100") else "bot"


class MessageIds:
    """The highest message id this process has seen in each id space (inbound messages,
    its own sends and posts), so an attempt can note its floor before it begins."""

    def __init__(self) -> None:
        self.run = secrets.token_hex(6)  # marks of this process's attempts begin with it
        self._highest: dict[str, int] = {}

    def saw(self, chat_id: str | int, message_id: int) -> None:
        space = id_space(chat_id)
        if message_id > self._highest.get(space, 0):
            self._highest[space] = message_id

    def mark(self, chat_id: str) -> str:
        """``run/floor``: who makes the attempt, and the highest id seen in the chat's space
        (empty when none was seen yet)."""
        highest = self._highest.get(id_space(chat_id))
        return f"{self.run}/{'' if highest is None else highest}"

    def ours(self, attempt: SendAttempt) -> bool:
        """Whether this process made ``attempt`` (so it knows how it ended)."""
        return not attempt.draft and (attempt.mark or "").startswith(f"{self.run}/")


def _marked_floor(attempt: SendAttempt) -> int | None:
    _, _, tail = (attempt.mark or "").partition("/")
    return int(tail) if tail.isdigit() else None


def _ids(messages: Iterable[KnownMessage], space: str) -> list[tuple[int, float]]:
    found = []
    for known in messages:
        if id_space(known.chat_id) != space:
            continue
        message_id = telegram_message_id(known.message_id)
        if message_id is not None:
            found.append((message_id, known.at))
    return found


def floor(lost: LostSend, attempt: SendAttempt) -> int | None:
    """The highest id known to exist in the chat's id space when ``attempt`` began."""
    message = lost.message
    candidates = [_marked_floor(attempt)]
    if message.reply_to_message_id is not None:
        candidates.append(telegram_message_id(message.reply_to_message_id))
    space = id_space(message.chat_id)
    for known in lost.known:
        message_id = telegram_message_id(known.message_id)
        if message_id is None or id_space(known.chat_id) != space:
            continue
        # a message the turn answers ("chat:id", from the journal) was written before it
        if ":" in known.message_id or known.at <= attempt.at - CLOCK_SKEW:
            candidates.append(message_id)
    present = [c for c in candidates if c is not None]
    return max(present) if present else None


async def find(lost: LostSend, is_ours: IsOurs) -> list[int]:
    """The bot's unrecorded messages in the chat above the floors of the lost attempts
    (this message's parts that arrived, draft posts whose id was lost), oldest first."""
    chat_id = lost.message.chat_id
    space = id_space(chat_id)
    skip = {message_id for message_id, _ in _ids(lost.known, space)}
    skip.update(d for d in (telegram_message_id(d) for d in lost.drafts) if d is not None)
    probed: set[int] = set()
    found: list[int] = []
    for attempt in lost.attempts:
        start = floor(lost, attempt)
        if start is None:
            log.warning(
                "telegram: cannot tell what an interrupted send to chat %s left (no message "
                "id known before it); the message may show twice",
                chat_id,
            )
            continue
        ids = _window(start, skip | probed)
        probed.update(ids)
        # the first alone: while Telegram fails, one call per attempt is enough
        batches = [ids[:1], *(ids[i : i + PROBE_BATCH] for i in range(1, len(ids), PROBE_BATCH))]
        for batch in batches:
            answers = await asyncio.gather(*(is_ours(chat_id, i) for i in batch))
            found.extend(i for i, ours in zip(batch, answers, strict=True) if ours)
    return sorted(found)


def _window(start: int, skip: set[int]) -> list[int]:
    """The first :data:`PROBE_WINDOW` ids above ``start`` that are not in ``skip``."""
    ids: list[int] = []
    candidate = start
    while len(ids) < PROBE_WINDOW:
        candidate += 1
        if candidate not in skip:
            ids.append(candidate)
    return ids
