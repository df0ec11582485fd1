"""What lost sends left in Telegram chats: the probing rule, one scan per id space.

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
:data:`CLOCK_SKEW`). The *free* ids above the floor are those the store does not know
(other answers, other drafts, this turn's own drafts, messages people sent) and that no
other lost send was found to own (ids are unique in a space). Every free id that is the
bot's own message in the chat is one the gateway left unrecorded: a part of this message
that arrived, or a draft post whose id was lost (the gateway records every other message it
sends). The message is then delivered into them (:meth:`Sender.redeliver
<channels.telegram.sender.Sender.redeliver>`): each part edits one ("not modified" where it
already shows it), the rest is sent, the ones left over are deleted.

**Together, and only as far as needed.** The sends lost at one moment (after a restart:
every chat whose answer was on its way) are settled together, one scan per id space
(:class:`Recovery`), so the cost follows what was lost, not its square:

1. Each lost send first probes the id it most likely got: the sends of one moment were
   numbered in the order they were made, so the k-th lost send above a floor (by the time
   its attempt was recorded) got about the k-th free id above it. In waves of :data:`WAVE`,
   until a wave finds nothing (those after it were likely never made: a send waiting for a
   connection when the process died).
2. Each id up to the highest found (or, once this process made a message there since, up
   to that one's id: every lost message is below it) that no send was found to own is
   asked of the sends that missed, those nearest its place in the order first, at most
   :data:`NEAREST` of them (two sends that reached Telegram swapped: one probe more each).
3. It stops as soon as it found as many messages as its lost attempts could have made (a
   draft's post: one; a send: its parts and files): a lost answer usually costs one probe.
4. One that found fewer probes every free id nobody owns below the highest id found, then
   goes on until :data:`PROBE_WINDOW` free ids above that were probed, or up to
   the first id this process made in that space :data:`LATE` seconds or more after its lost
   attempts began (no lost request is numbered after it; :data:`CLOCK_SKEW` more when
   another machine made them: a cluster node). When several found nothing, the first
   probes its window and is sent; the others then only probe below that send's id. It is
   sent as a new message even where it would be edited into a draft of the new run
   (:class:`Found`): an edit makes no id, and the others would wait for one in vain.

Probes have a pacing budget of their own (``Pacing.probes`` in channels/telegram/sender.py:
30 a second after a burst of 30, apart from the answers' buckets), so settling many lost
sends never takes an answer's slot, and a wait for a probe slot is waited, never turned
into a hold of the chat.

**Where it cannot decide** (the message may then show twice): an attempt with no floor at
all (nothing seen in that space since the start, nothing recorded, not a reply); more than
``PROBE_WINDOW`` messages unknown to the store made in the id space between the floor and
the message (in private chats: all of the bot's private chats and small groups together,
those of lost sends found meanwhile aside); a message the person deleted in between (it is
sent again: they see it once more); a request that reaches Telegram later than the
outbox's grace (and :data:`LATE`) after its process died. An unrecorded message of the bot
in the window that is none of these (none exists unless another program uses the same
token) would be taken into the message.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import hashlib
import logging
import re
import secrets
import socket
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from gateway.core.channel import KnownMessage, LostSend, SendAttempt

log = logging.getLogger(__name__)

PROBE_WINDOW = 30  # free ids probed above a lost send's floor, at most
PROBES_AT_ONCE = 10  # probes in flight at once
WAVE = 5  # lost sends whose likeliest id is probed together (step 1)
NEAREST = 4  # sends an id is asked of, nearest its place in the order first (step 2)
CLOCK_SKEW = 5.0  # seconds: a record counts as older than an attempt only by this margin
LATE = 2.0  # seconds: a request of a lost attempt has been numbered by then (the outbox's grace)
GATHER = 0.25  # seconds the first lost send of a moment waits for the others to join it
BOUND_WAIT = 5.0  # seconds the others wait for the first send that bounds their scans
_OWNERS_KEPT = 10_000  # ids found to be the bot's, per id space, kept for later scans
_MADE_KEPT = 256  # ids this process made, per id space, kept as bounds

IsOurs = Callable[[str, int], Awaitable[bool]]  # (chat id, message id) -> the bot's own?

_JOURNAL_ID = re.compile(r"^-?\d+:(\d+)$")  # a message people sent: "chat:id" in the journal
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:6]  # in attempts' marks


def id_space(chat_id: str | int) -> str:
    """The counter a chat's message ids come from: its own (supergroups, channels) or the
    bot's (private chats and basic groups)."""
    text = str(chat_id)
    return text if text.startswith("-100") else "bot"


def message_number(known: KnownMessage) -> int | None:
    """The Telegram message id of a record: a receipt or draft (``"123"``) or a journaled
    message (``"chat:123"``); ``None`` for anything else (an edit's or a button press's id)."""
    if known.message_id.isdigit():
        return int(known.message_id)
    matched = _JOURNAL_ID.match(known.message_id)
    return int(matched.group(1)) if matched else None


class MessageIds:
    """The highest message id this process has seen in each id space (inbound messages,
    its own sends and posts), so an attempt can note its floor before it begins; and the
    ids it made, with when their request began, which bound the scans of lost sends."""

    def __init__(self) -> None:
        # marks of this process's attempts begin with it: this machine, then this process
        self.run = f"{_HOST}.{secrets.token_hex(6)}"
        self._highest: dict[str, int] = {}
        self._made: dict[str, list[tuple[float, int]]] = {}
        self._new = asyncio.Event()

    def saw(self, chat_id: str | int, message_id: int) -> None:
        space = id_space(chat_id)
        if message_id > self._highest.get(space, 0):
            self._highest[space] = message_id

    def made(self, chat_id: str | int, message_id: int, began: float) -> None:
        """This process made ``message_id`` by a request that began at ``began``."""
        self.saw(chat_id, message_id)
        made = self._made.setdefault(id_space(chat_id), [])
        made.append((began, message_id))
        made.sort()
        del made[:-_MADE_KEPT]
        self._new.set()

    def bound(self, space: str, after: float) -> int | None:
        """The lowest id made by a request this process began at ``after`` or later: every
        message numbered before ``after`` (a lost attempt's, say) has a lower id."""
        made = self._made.get(space, [])
        later = [message_id for began, message_id in made[bisect.bisect_left(made, (after,)) :]]
        return min(later, default=None)

    async def bound_within(self, space: str, after: float, seconds: float) -> int | None:
        """:meth:`bound`, waiting up to ``seconds`` for this process to make one."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                while (found := self.bound(space, after)) is None:
                    self._new.clear()
                    await self._new.wait()
                return found
        return None

    def mark(self, chat_id: str) -> str:
        """``run/floor``: who makes the attempt, and the highest id seen in the chat's space
        (empty when none was seen yet)."""
        highest = self._highest.get(id_space(chat_id))
        return f"{self.run}/{'' if highest is None else highest}"

    def ours(self, attempt: SendAttempt) -> bool:
        """Whether this process made ``attempt`` (so it knows how it ended)."""
        return not attempt.draft and (attempt.mark or "").startswith(f"{self.run}/")

    def numbered_by(self, attempt: SendAttempt) -> float:
        """When, on this machine's clock, Telegram had numbered ``attempt``'s request: its
        start and :data:`LATE`, and :data:`CLOCK_SKEW` when another machine made it (a
        cluster node: its clock may run ahead of this one)."""
        here = (attempt.mark or "").startswith(f"{_HOST}.")
        return attempt.at + LATE + (0.0 if here else CLOCK_SKEW)


def _marked_floor(attempt: SendAttempt) -> int | None:
    _, _, tail = (attempt.mark or "").partition("/")
    return int(tail) if tail.isdigit() else None


def floor(lost: LostSend, attempt: SendAttempt) -> int | None:
    """The highest id known to exist in the chat's id space when ``attempt`` began."""
    message = lost.message
    candidates = [_marked_floor(attempt)]
    if message.reply_to_message_id is not None:
        _, _, replied = message.reply_to_message_id.rpartition(":")
        candidates.append(int(replied) if replied.isdigit() else None)
    space = id_space(message.chat_id)
    for known in lost.known:
        message_id = message_number(known)
        if message_id is None or id_space(known.chat_id) != space:
            continue
        if known.answered or known.at <= attempt.at - CLOCK_SKEW:
            candidates.append(message_id)
    present = [c for c in candidates if c is not None]
    return max(present) if present else None


@dataclass(frozen=True, slots=True)
class Found:
    """What a lost send left: the bot's unrecorded messages in the chat, oldest first; and
    whether to send the message anew rather than edit it into a draft (``fresh``): it is
    the one let go first of those that found nothing, and its new id bounds the others'
    scans (a draft edited makes no id, so they would wait for one in vain)."""

    ids: list[int]
    fresh: bool = False


@dataclass(eq=False)
class _Lost:
    """One lost send being settled."""

    chat: str
    floor: int
    most: int  # messages its lost attempts could have made
    skip: frozenset[int]  # ids the store knows, and the turn's recorded drafts
    began: float  # when its first lost attempt began
    after: float | None  # a made id bounds its scan if its request began then (None: never)
    done: asyncio.Future[Found]
    found: list[int] = field(default_factory=list)
    fresh: bool = False  # sent anew: its id is to bound the others (Found.fresh)

    @property
    def complete(self) -> bool:
        return len(self.found) >= self.most

    def settle(self) -> None:
        if not self.done.done():
            self.done.set_result(Found(sorted(self.found), self.fresh))


@dataclass
class _Space:
    waiting: list[_Lost] = field(default_factory=list)
    round: asyncio.Task[None] | None = None
    owners: OrderedDict[int, str] = field(default_factory=OrderedDict)  # id -> chat
    top: int = 0  # the highest id found to be a lost send's
    scout: float = -BOUND_WAIT  # (monotonic) when one that found nothing was last let go


class Recovery:
    """Settles the lost sends of one bot, together per id space (the module's rule)."""

    def __init__(self, is_ours: IsOurs, ids: MessageIds, *, gather: float = GATHER) -> None:
        self._is_ours = is_ours
        self._ids = ids
        self._gather = gather
        self._spaces: dict[str, _Space] = {}
        self._in_flight = asyncio.Semaphore(PROBES_AT_ONCE)

    async def find(self, lost: LostSend, *, parts: int) -> Found:
        """The bot's unrecorded messages in the chat above the floors of the lost attempts
        (this message's parts that arrived, draft posts whose id was lost), oldest first,
        and whether to send the message anew (:class:`Found`). ``parts``: the messages one
        send of it makes (text parts and files)."""
        chat_id = lost.message.chat_id
        floors = [floor(lost, attempt) for attempt in lost.attempts]
        if None in floors:
            log.warning(
                "telegram: cannot tell what an interrupted send to chat %s left (no message "
                "id known before it); the message may show twice",
                chat_id,
            )
        present = [f for f in floors if f is not None]
        if not present:
            return Found([])
        space_name = id_space(chat_id)
        skip = {
            number
            for known in lost.known
            if id_space(known.chat_id) == space_name
            and (number := message_number(known)) is not None
        }
        skip.update(int(d) for d in lost.drafts if d.isdigit())
        theirs = not any(self._ids.ours(a) for a in lost.attempts)
        entry = _Lost(
            chat=chat_id,
            floor=min(present),
            most=sum(1 if a.draft else max(1, parts) for a in lost.attempts),
            skip=frozenset(skip),
            began=lost.since,
            after=max(map(self._ids.numbered_by, lost.attempts)) if theirs else None,
            done=asyncio.get_running_loop().create_future(),
        )
        space = self._spaces.setdefault(space_name, _Space())
        space.waiting.append(entry)
        if space.round is None:
            space.round = asyncio.create_task(self._rounds(space_name, space))
        return await entry.done

    async def stop(self) -> None:
        """Cancel the scans under way (their sends are cancelled too: the channel stops)."""
        rounds = [s.round for s in self._spaces.values() if s.round is not None]
        for task in rounds:
            task.cancel()
        await asyncio.gather(*rounds, return_exceptions=True)

    async def _rounds(self, name: str, space: _Space) -> None:
        """Settle what waits in the space, round after round, until nothing does."""
        try:
            await asyncio.sleep(self._gather)  # the lost sends of one moment come together
            while space.waiting:
                batch, space.waiting = space.waiting, []
                try:
                    await self._settle(name, space, batch)
                except Exception as exc:  # a probe failed (429, 5xx): each send hears it
                    for entry in batch:
                        if not entry.done.done():
                            entry.done.set_exception(exc)
                for entry in batch:
                    entry.settle()
        finally:
            space.round = None

    async def _settle(self, name: str, space: _Space, batch: list[_Lost]) -> None:
        batch.sort(key=lambda e: e.began)
        probed: set[tuple[str, int]] = set()
        # 1. the likeliest id of each: the k-th lost send took about the k-th free id; in
        # waves, until a wave finds nothing above the highest id found (the rest were
        # never made, or are found in 2 and 3)
        guessed: set[int] = set()
        cursor = 0
        for first in range(0, len(batch), WAVE):
            wave: list[tuple[_Lost, int]] = []
            for entry in batch[first : first + WAVE]:
                guess = self._free_above(space, entry, max(cursor, entry.floor), guessed)
                wave.append((entry, guess))
                guessed.add(guess)
                cursor = guess
            await self._probe_all(space, wave, probed)
            if not any(entry.found for entry, _ in wave):
                break
        # 2. the ids lost messages occupy (below the highest found, or below the first id
        # this process made since), each asked of the sends nearest its place first
        limits = {e: max(space.top + 1, self._bound(name, e) or 0) for e in batch}
        await self._by_id(space, batch, probed, limits)
        # 3. the rest of the window, below a bound where there is one
        rest = [e for e in batch if not e.complete]
        await asyncio.gather(*(self._bounded(name, space, e, probed) for e in rest if e.found))
        await self._one_by_one(name, space, [e for e in rest if not e.found], probed)

    def _bound(self, name: str, entry: _Lost) -> int | None:
        """The first id this process made after ``entry``'s requests were numbered."""
        return None if entry.after is None else self._ids.bound(name, entry.after)

    async def _by_id(
        self,
        space: _Space,
        batch: list[_Lost],
        probed: set[tuple[str, int]],
        limits: dict[_Lost, int],
    ) -> None:
        """Ask each id below the limits of the sends that missed whose it is: first of the
        :data:`NEAREST` sends nearest its place in the order (the k-th id above the floor
        went to about the k-th send), in parallel across ids."""
        waiting = [e for e in batch if not e.complete]
        if not waiting:
            return
        lowest = min(e.floor for e in waiting)
        known = frozenset.intersection(*(e.skip for e in waiting))  # the store's records
        places = [x for x in range(lowest + 1, max(limits.values())) if x not in known]
        rank = {entry: i for i, entry in enumerate(batch)}

        async def ask(place: int, message_id: int) -> None:
            nearest = sorted(
                (
                    e
                    for e in waiting
                    if e.floor < message_id < limits[e] and message_id not in e.skip
                ),
                key=lambda e: abs(rank[e] - place),
            )
            for entry in nearest[:NEAREST]:
                if message_id in space.owners:
                    return
                if not entry.complete and (entry.chat, message_id) not in probed:
                    await self._probe_all(space, [(entry, message_id)], probed)

        await asyncio.gather(*(ask(p, x) for p, x in enumerate(places)))

    async def _bounded(
        self, name: str, space: _Space, entry: _Lost, probed: set[tuple[str, int]]
    ) -> None:
        """The rest of the window of one that found part of its message, below the bound."""
        await self._scan(space, entry, probed, limit=self._bound(name, entry))

    async def _one_by_one(
        self, name: str, space: _Space, entries: list[_Lost], probed: set[tuple[str, int]]
    ) -> None:
        """Those that found nothing, the earliest first: each is settled (and sent) before
        the next is probed, whose scan then stops below the id that send got; and the ids
        below it are asked by id first (step 2 again, now up to the bound)."""
        # one let go a moment ago (an earlier round's) is being sent: its id is coming
        wait = max(0.0, space.scout + BOUND_WAIT - time.monotonic())
        while entries:
            entry, *entries = entries
            bound = None
            if entry.after is not None:
                bound = await self._ids.bound_within(name, entry.after, wait)
            await self._scan(space, entry, probed, limit=bound)
            later = max((e.after for e in entries if e.after is not None), default=None)
            if not entry.found and bound is None and later is not None:
                # it is sent once the others' requests were numbered: its id bounds them all
                await asyncio.sleep(min(max(0.0, later - time.time()), LATE + CLOCK_SKEW))
                entry.fresh = wait == 0.0  # let go to be sent (below): as a new message
            entry.settle()
            if entry.found:
                continue
            if bound is None and wait > 0.0:
                wait = 0.0  # waited in vain (its send failed): the next one is sent first
                continue
            wait, space.scout = BOUND_WAIT, time.monotonic()  # sent now: its id is coming
            if (
                bound is None
                and later is not None
                and await self._ids.bound_within(name, later, wait)
            ):
                limits = {e: max(space.top + 1, self._bound(name, e) or 0) for e in entries}
                await self._by_id(space, entries, probed, limits)
                entries = [e for e in entries if not e.complete]

    def _free_above(self, space: _Space, entry: _Lost, start: int, taken: Iterable[int]) -> int:
        """The first free id of ``entry`` above ``start`` that is not in ``taken``."""
        excluded = set(taken)
        candidate = start + 1
        while candidate in entry.skip or candidate in excluded or candidate in space.owners:
            candidate += 1
        return candidate

    async def _scan(
        self,
        space: _Space,
        entry: _Lost,
        probed: set[tuple[str, int]],
        *,
        limit: int | None = None,
    ) -> None:
        """Probe ``entry``'s free ids above its floor, in order, until it is complete, its
        window is probed, or ``limit`` (exclusive) is reached. The window counts only ids
        above the highest id found to be a lost send's: below it, an id nobody owns yet may
        be another lost send's not found yet, so every one there is probed."""
        candidate, counted = entry.floor, 0
        while not entry.complete and counted < PROBE_WINDOW:
            candidate += 1
            if limit is not None and candidate >= limit:
                return
            if candidate in entry.skip or candidate in entry.found:
                continue
            owner = space.owners.get(candidate)
            if owner is not None and owner != entry.chat:
                continue  # another lost send's message: never this one
            if candidate > space.top:
                counted += 1
            if (entry.chat, candidate) not in probed:  # else a miss before
                await self._probe_all(space, [(entry, candidate)], probed)

    async def _probe_all(
        self, space: _Space, probes: list[tuple[_Lost, int]], probed: set[tuple[str, int]]
    ) -> None:
        async def probe(entry: _Lost, message_id: int) -> None:
            probed.add((entry.chat, message_id))
            async with self._in_flight:
                ours = await self._is_ours(entry.chat, message_id)
            if ours:
                entry.found.append(message_id)
                space.top = max(space.top, message_id)
                space.owners[message_id] = entry.chat
                space.owners.move_to_end(message_id)
                while len(space.owners) > _OWNERS_KEPT:
                    space.owners.popitem(last=False)
                if entry.complete:
                    entry.settle()  # its delivery can start while the others are probed

        await asyncio.gather(*(probe(entry, message_id) for entry, message_id in probes))
