"""Finding what a send of unknown outcome left on Signal: the recipients' delivery receipts.

Signal names a message by its author and timestamp, and signal-cli picks the timestamp when
it sends (the ``send`` result returns it), so a send whose result was lost (the process
died during the call, the call timed out) left a message nobody here knows the name of.
Signal cannot be asked what was sent, but every device that gets a message answers with a
delivery receipt naming its timestamp, and a receipt reaches us only for *our* messages.
So a resend looks for receipts, from the chat's people, of timestamps from the moment the
lost attempt began that are not one of the messages the store knows: each is a part of
this message that arrived (parts go one at a time, in order, and a chat has one message on
its way at a time). It waits for them up to ``signal.resend_wait_seconds`` after the attempt
began, or after this process's event stream connected, whichever is later (receipts that
came while the gateway was down reach it then, where signal-cli kept them); parts found
count as sent, the rest is sent.

What it cannot decide (docs/reliability.md): a recipient whose devices were all offline
sends no receipt, so the message goes again and may show twice once they are back; in a
group any member's receipt counts, so a member's direct chat losing a send at the same
moment can be mistaken for it; signal-cli versions that keep no events for a reconnecting
client lose the receipts that came while the gateway was down.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass

from channels.signal.convert import Receipt

SKEW_MS = 2_000  # signal-cli's clock may run behind the gateway's by this much
_KEPT = 10_000
POLL = 0.25  # seconds between looks while waiting (receipts also wake the waiters)


@dataclass(frozen=True, slots=True)
class Delivered:
    who: frozenset[str]  # the sender of the receipt: number and UUID
    timestamp: int


class ReceiptBook:
    """The delivery receipts this process heard, newest last (bounded)."""

    def __init__(self) -> None:
        self._seen: deque[Delivered] = deque(maxlen=_KEPT)
        self._arrived = asyncio.Event()

    def add(self, receipt: Receipt) -> None:
        who = frozenset({receipt.sender, receipt.sender_uuid} - {""})
        for stamp in receipt.timestamps:
            self._seen.append(Delivered(who, stamp))
        self._arrived.set()

    def delivered(
        self, people: Collection[str], *, since_ms: int, known: Collection[int]
    ) -> list[int]:
        """Timestamps from ``since_ms`` on that one of ``people`` got, not ``known``, in order."""
        wanted = set(people)
        return sorted(
            {
                d.timestamp
                for d in self._seen
                if d.timestamp >= since_ms and d.timestamp not in known and d.who & wanted
            }
        )

    async def next_receipt(self) -> None:
        """Until the next receipt arrives."""
        self._arrived.clear()
        await self._arrived.wait()


class Finder:
    """Waits for the receipts of a lost send's parts (see the module's docstring)."""

    def __init__(
        self,
        book: ReceiptBook,
        *,
        wait_seconds: float,
        listening_since: Callable[[], float | None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._book = book
        self._wait = wait_seconds
        self._listening_since = listening_since
        self._clock = clock

    async def arrived(
        self, people: Collection[str], *, since: float, parts: int, known: Collection[int]
    ) -> list[int]:
        """The timestamps of the first parts that arrived (at most ``parts``)."""
        since_ms = int(since * 1000) - SKEW_MS
        while True:
            found = self._book.delivered(people, since_ms=since_ms, known=known)
            listening = self._listening_since()
            start = max(since, listening if listening is not None else self._clock())
            left = start + self._wait - self._clock()
            if len(found) >= parts or left <= 0:
                return found[:parts]
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(left, POLL)):
                    await self._book.next_receipt()
