"""Answers streamed by editing (Telegram, Discord, Slack): one message grows as the model writes.

For a chat whose channel can edit (:class:`SupportsDrafts`) and where streaming is on (the
channel's ``streaming`` setting; unset: direct chats only), the answer's words are shown
once the turn has run ``<channel>.stream_after_seconds`` (0.7 s): an answer complete before
then is sent once, as one message, which is what most quick answers are (a draft and its
edits would cost three platform calls where one does); words that first come after that
delay wait a moment more (``FIRST_WORDS_SETTLE``), and nothing is shown before a second
fragment, so an answer that arrives all at once is still sent once. From then on the draft is posted and
edited at most once every ``draft_interval`` seconds for that chat (Telegram: 1 s) while
the text grows. Where the platform shows a preview that is not a message
(:class:`SupportsDraftPreview`: Telegram's ``sendMessageDraft`` in private chats), the
words go there instead, and nothing needs finishing: the answer is sent as usual and the
preview goes away; where the platform refuses previews, the draft falls back to editing. Past the
platform's length limit the draft continues in a new message; the channel splits the text
(``draft_parts``) so a code block cut in two is closed and reopened. When the model calls a
tool, the words before it were narration: the next text starts the draft over.

The draft is cosmetic, the outbox's final message stays the answer. The turn stops its
draft before it commits (:meth:`DraftStreamer.settle`), so whichever node delivers the answer
(in a cluster the leader, whatever node ran the turn) finds every post recorded; a post is
recorded only while its turn runs, and only under the turn's claim on its session
(gateway/store/cluster/fencing.py), so a node that lost the session posts nothing more. The outbound
worker closes the draft (:meth:`DraftStreamer.close`) and lets the channel edit the drafts into the
formatted final text (posting what does not fit, deleting drafts left over; see
gateway/runtime/outbound/attempt.py). Every draft post is recorded before it is made and its
platform id the moment it returns (gateway/store/drafts.py), so after a crash or restart the
final message still finishes the same messages, and a post whose id was lost is found and
edited into the answer or deleted: the user sees one complete answer, never the draft plus a
second copy. In a cluster, the drafts a turn posted before another node claimed its session
are retired (gateway/store/drafts.py): the node that lost the session may still edit them,
so the answer is never delivered into them; they are deleted once it is out. A turn that
ends without an answer for the chat deletes its drafts. Display
failures never fail a turn: a rate limit delays the next edit, a refused draft stops
streaming for that turn (the final message is then posted as usual).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from gateway.core.channel import (
    Channel,
    KnownMessage,
    LostSend,
    SupportsDraftPreview,
    SupportsDrafts,
    SupportsResend,
)
from gateway.core.errors import (
    ChannelError,
    ChannelPermanentError,
    ChannelRateLimited,
    StoreError,
)
from gateway.core.messages import ChatRef, OutboundKind, OutboundMessage
from gateway.store.drafts import DraftMessages, Drafts

log = logging.getLogger(__name__)

Clock = Callable[[], float]
Enabled = Callable[[str, bool], bool]  # (channel name, is a group) -> stream there?
Delay = Callable[[str], float]  # channel name -> seconds a turn runs before it streams
TextSink = Callable[[str], Awaitable[None]]


class Known(Protocol):
    """The messages of a channel the store knows of (:meth:`Outbox.known`)."""

    async def __call__(
        self, channel: str, *, since: float, turn_id: str | None
    ) -> list[KnownMessage]: ...


DRAFTED_KINDS = frozenset({OutboundKind.REPLY, OutboundKind.NOTICE, OutboundKind.STOPPED})
KNOWN_LOOKBACK = 600.0  # seconds before a lost post whose records a channel is given
ENDED_KEPT = 256  # drafts of ended turns kept for their delivery (answers with buttons never ask)
# Seconds the first words wait before they are shown when they come after the turn's delay (a
# turn queued for a model slot, a slow first token): an answer that arrives all at once then
# completes before it, and is sent once instead of as a draft plus its final edit.
FIRST_WORDS_SETTLE = 0.25


@dataclass(eq=False)
class _Draft:
    channel: SupportsDrafts
    chat: ChatRef
    turn_id: str
    reply_to: str | None
    next_at: float  # nothing shown before this (the turn's delay, the chat's interval, a 429)
    preview: bool  # shown as the platform's preview (SupportsDraftPreview), not a message
    ids: list[str] | None  # platform ids of the draft's messages (None: not loaded)
    # messages an earlier claim of the session posted (a cluster): never edited here, deleted
    # once the answer is out (gateway/store/drafts.py)
    retired: tuple[str, ...] = ()
    text: str = ""
    version: int = 0  # bumped by every fragment
    shown: list[str | None] = field(default_factory=list)  # what each of them shows
    unsure: bool = False  # a post's outcome is unknown: the store knows more than ``ids``
    closed: bool = False
    # this process's attempt at the turn was committed (:meth:`DraftStreamer.turn_ended`):
    # until then another attempt (the turn resumed on another node after this one's commit
    # failed) may have posted drafts this process never saw
    committed: bool = False
    broken: bool = False  # the platform refused a draft: stop streaming this turn
    previewed: bool = False  # the platform's preview showed some of it
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    timer: asyncio.Task[None] | None = None

    def load(self, stored: DraftMessages) -> list[str]:
        """Take on what the store recorded of this turn's draft (a turn resumed, or run
        here before a restart): its messages (returned), the retired ones, posts of unknown
        fate."""
        self.ids = list(stored.ids)
        self.retired = stored.retired
        self.unsure = bool(stored.lost)  # the delivery must find those posts
        self.shown = [None] * len(self.ids)
        return self.ids


class DraftStreamer:
    def __init__(
        self,
        channels: Mapping[str, Channel],
        drafts: Drafts,
        *,
        enabled: Enabled,
        delay: Delay = lambda channel: 0.0,
        known: Known | None = None,
        clock: Clock = time.monotonic,
        wall_clock: Clock = time.time,
    ) -> None:
        self._channels = channels
        self._store = drafts
        self._enabled = enabled
        self._delay = delay
        self._known = known
        self._clock = clock
        self._wall_clock = wall_clock
        self._live: dict[tuple[str, str], _Draft] = {}
        # drafts of turns that ended with an answer, until that answer's delivery asks
        self._ended: OrderedDict[tuple[str, str], _Draft] = OrderedDict()

    def _drafting(self, chat: ChatRef) -> SupportsDrafts | None:
        channel: object = self._channels.get(chat.channel)
        return channel if isinstance(channel, SupportsDrafts) else None

    # -- while the turn runs --------------------------------------------------------------

    def sinks(
        self, chat: ChatRef, turn_id: str, *, group: bool, reply_to: str | None, fresh: bool
    ) -> tuple[TextSink, TextSink] | None:
        """``(on_text, on_tool)`` for a turn answering in ``chat``, or ``None`` when that
        chat does not stream by editing. ``fresh``: the turn began in this process, so no
        draft of it was posted before (a resumed one may have some: they are read)."""
        channel = self._drafting(chat)
        if channel is None or not self._enabled(chat.channel, group):
            return None
        key = (chat.session_key, turn_id)
        show_from = self._clock() + self._delay(chat.channel)
        preview = isinstance(channel, SupportsDraftPreview) and channel.previews_in(
            chat, group=group
        )

        async def on_text(delta: str) -> None:
            draft = self._live.get(key)
            if draft is None:
                first_at = max(show_from, self._clock() + FIRST_WORDS_SETTLE)
                draft = self._live[key] = _Draft(
                    channel, chat, turn_id, reply_to, first_at, preview, [] if fresh else None
                )
            if draft.closed or draft.broken or not delta:
                return
            draft.text += delta
            draft.version += 1
            # One fragment is not yet a stream: an answer that arrives in one piece is sent
            # once, never shown first as a draft of itself.
            if draft.timer is None and draft.version > 1:
                draft.timer = asyncio.create_task(self._run(draft), name=f"draft:{turn_id}")

        async def on_tool(name: str) -> None:
            draft = self._live.get(key)
            if draft is not None:  # the words before a tool call were not the answer
                draft.text = ""

        return on_text, on_tool

    async def _run(self, draft: _Draft) -> None:
        """Show the draft's text, then again whenever it grew, one edit per interval."""
        while True:
            wait = draft.next_at - self._clock()
            if wait > 0:
                await asyncio.sleep(wait)
            async with draft.lock:
                if draft.closed or draft.broken:
                    return
                version = draft.version
                await self._show(draft)
                if draft.version == version:
                    draft.timer = None
                    return

    async def _show(self, draft: _Draft) -> None:
        channel, chat = draft.channel, draft.chat
        now = self._clock()
        draft.next_at = now + channel.draft_interval
        try:
            if draft.preview and await self._preview(draft):
                return
            ids = draft.ids
            if ids is None:
                ids = draft.load(
                    await self._store.of(chat.channel, chat.session_key, draft.turn_id)
                )
            for index, part in enumerate(channel_parts(draft)):
                if index < len(ids):
                    if draft.shown[index] != part:
                        await channel.edit_draft(chat, ids[index], part)
                        draft.shown[index] = part
                    continue
                message_id = await self._post(draft, part)
                ids.append(message_id)
                draft.shown.append(part)
        except ChannelRateLimited as exc:
            draft.next_at = now + max(exc.retry_after, channel.draft_interval)
        except ChannelPermanentError as exc:
            log.info("%s: streaming stopped for this answer: %s", chat.channel, exc)
            draft.broken = True
        except ChannelError as exc:
            log.debug("%s: draft not updated: %s", chat.channel, exc)
            draft.next_at = now + 2 * channel.draft_interval
        except StoreError as exc:  # the turn is over, or its node lost the session
            log.info("%s: streaming stopped for this answer: %s", chat.channel, exc)
            draft.broken = True
        except Exception:
            log.exception("%s: draft display failed", chat.channel)
            draft.broken = True

    async def _preview(self, draft: _Draft) -> bool:
        """Show the draft's last part as the platform's preview; ``False`` when the
        platform refused it (the draft goes on as messages)."""
        channel = draft.channel
        assert isinstance(channel, SupportsDraftPreview)
        parts = channel_parts(draft)
        if not parts:
            return True
        try:
            await channel.preview_draft(draft.chat, preview_id(draft.turn_id), parts[-1])
        except ChannelPermanentError as exc:
            log.info("%s: no previews (%s); streaming by editing", draft.chat.channel, exc)
            draft.preview = False
            return False
        draft.previewed = True
        return True

    async def _post(self, draft: _Draft, part: str) -> str:
        """Post a new draft message, recorded before (with what the channel needs to find
        it again) and after (its id): a post whose id was lost is still known to exist."""
        channel, chat = draft.channel, draft.chat
        mark = channel.send_mark(chat) if isinstance(channel, SupportsResend) else None
        slot = await self._store.posting(chat.channel, chat.session_key, draft.turn_id, mark)
        try:
            message_id = await channel.post_draft(chat, part, reply_to=draft.reply_to)
        except (ChannelRateLimited, ChannelPermanentError):  # refused: nothing was posted
            await self._store.not_posted(chat.channel, chat.session_key, draft.turn_id, slot)
            raise
        except BaseException:  # it may be out there: the store's record says so
            draft.unsure = True
            raise
        try:
            await self._store.posted(
                chat.channel, chat.session_key, draft.turn_id, slot, message_id
            )
        except BaseException:  # posted, but the store has only the record of the attempt
            draft.unsure = True
            raise
        return message_id

    # -- when the answer is final ---------------------------------------------------------

    def drafting(self, message: OutboundMessage) -> SupportsDrafts | None:
        """The channel, if ``message`` is delivered into its turn's draft (a turn's answer
        or notice, without buttons, in a chat that streams by editing)."""
        if (
            message.turn_id is None
            or message.kind not in DRAFTED_KINDS
            or message.actions  # buttons are posted, never edited into a draft
        ):
            return None
        return self._drafting(message.chat)

    def previewed(self, chat: ChatRef, turn_id: str) -> bool:
        """Whether this process showed some of the turn's answer in a preview (a preview is
        no message: what a stopped answer had shown there is sent as one)."""
        key = (chat.session_key, turn_id)
        draft = self._ended.get(key) or self._live.get(key)
        return draft is not None and draft.previewed

    async def close(self, chat: ChatRef, turn_id: str) -> DraftMessages:
        """Stop showing a turn's draft (waiting for a post or edit under way) and return
        its messages as recorded. Read from the store unless this process knows them all
        (a turn begun here, committed here, whose posts all returned and were recorded). An
        attempt whose commit failed knows only its own posts: the turn resumed elsewhere may
        have posted others, so the store is asked."""
        key = (chat.session_key, turn_id)
        draft = self._ended.pop(key, None) or self._live.get(key)
        if draft is not None:
            await self._stop_showing(key, draft)
            if draft.committed and draft.ids is not None and not draft.unsure:
                return DraftMessages(tuple(draft.ids), retired=draft.retired)
        return await self._store.of(chat.channel, chat.session_key, turn_id)

    async def _stop_showing(self, key: tuple[str, str], draft: _Draft) -> None:
        draft.closed = True
        if draft.timer is not None and not draft.lock.locked():
            draft.timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await draft.timer
        async with draft.lock:  # a draft being posted is recorded first
            pass
        if self._live.get(key) is draft:
            del self._live[key]

    async def settle(self, chat: ChatRef, turn_id: str) -> None:
        """The turn's words are all written: stop showing its draft before the turn is
        committed, waiting for a post or edit under way. So by the time any node's outbox
        can deliver the answer into the draft (in a cluster, the leader, which never saw
        this draft), every post of it is recorded with its id and nothing of this turn
        edits the chat any more: the answer is left alone, never a draft beside it."""
        key = (chat.session_key, turn_id)
        draft = self._live.get(key)
        if draft is None:
            return
        await self._stop_showing(key, draft)
        self._ended[key] = draft
        while len(self._ended) > ENDED_KEPT:
            self._ended.popitem(last=False)

    async def turn_ended(self, chat: ChatRef, turn_id: str, *, answered: bool) -> None:
        """The turn is committed (or parked): stop editing; without an answer for this chat
        its draft messages go (those whose id was lost too, found the channel's way)."""
        channel = self._drafting(chat)
        if channel is None:
            return
        if answered:  # the answer's delivery finishes the draft
            await self.settle(chat, turn_id)
            ended = self._ended.get((chat.session_key, turn_id))
            if ended is not None:
                ended.committed = True
            return
        stored = await self.close(chat, turn_id)
        if not (stored.ids or stored.lost or stored.retired):
            return
        if stored.lost and isinstance(channel, SupportsResend):
            try:
                await channel.resend(await self._nothing(chat, turn_id, stored))
            except ChannelError as exc:
                log.info("%s: could not delete a draft: %s", chat.channel, exc)
            await self.discard(chat, stored.retired)
        else:
            await self.discard(chat, stored.ids + stored.retired)
        await self._store.forget(chat.channel, chat.session_key, turn_id)

    async def discard(self, chat: ChatRef, message_ids: tuple[str, ...]) -> None:
        """Delete draft messages: a turn's that ended without an answer, or those an
        earlier claim of the session posted (a cluster: the node that posted them may still
        be editing them, so the answer never goes into them). One already gone, or any
        failure, is only logged."""
        channel = self._drafting(chat)
        if channel is None:
            return
        for message_id in message_ids:
            try:
                await channel.delete_draft(chat, message_id)
            except ChannelError as exc:
                log.info("%s: could not delete a draft: %s", chat.channel, exc)

    async def _nothing(self, chat: ChatRef, turn_id: str, stored: DraftMessages) -> LostSend:
        """A "resend" of no text: every draft message, found or recorded, is deleted."""
        since = min(a.at for a in stored.lost) - KNOWN_LOOKBACK
        known = (
            ()
            if self._known is None
            else await self._known(chat.channel, since=since, turn_id=turn_id)
        )
        empty = OutboundMessage(
            chat.channel, chat.chat_id, "", thread_id=chat.thread_id, turn_id=turn_id
        )
        return LostSend(empty, stored.lost, stored.ids, tuple(known))

    async def stop(self) -> None:
        """Stop every edit still scheduled (the gateway stops; the drafts stay recorded)."""
        timers = [d.timer for d in self._live.values() if d.timer is not None]
        for draft in self._live.values():
            draft.closed = True
        self._live.clear()
        for timer in timers:
            timer.cancel()
        await asyncio.gather(*timers, return_exceptions=True)
        self._ended.clear()


def channel_parts(draft: _Draft) -> list[str]:
    """The messages the draft's text takes on its platform (none while it is blank)."""
    return draft.channel.draft_parts(draft.text) if draft.text.strip() else []


def preview_id(turn_id: str) -> int:
    """A turn's preview id: non-zero, the same for every update of its answer."""
    return zlib.crc32(turn_id.encode()) or 1
