"""Outbox delivery: one worker per channel, one message in flight per chat.

A rate-limited chat is held until the platform's ``retry_after`` (its later messages wait
behind it, other chats go on); transient failures back off exponentially with jitter; a
permanent failure is recorded and the chat's next message proceeds. Nothing here sleeps
inside a turn: turns only queue, this worker sends.

Each attempt is recorded before the platform call and its result the moment the call
returns (gateway/runtime/outbound/attempt.py), so a crash at any instant of a send leaves a row the
next attempt resends without doubling the message. A row the worker finds ``sending`` that
it is not sending itself was cut short (a crash, another node that led) and is resent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from gateway.core.backoff import backoff_delay
from gateway.core.channel import Channel
from gateway.core.errors import ChannelPermanentError, ChannelRateLimited, StoreUnavailable
from gateway.core.lifecycle import Service
from gateway.runtime.bus import Bus
from gateway.runtime.outbound.attempt import Delivered, Delivery
from gateway.runtime.outbound.drafts import DraftStreamer
from gateway.store import Outbox, OutboxRecord
from gateway.store.outbox import Fence

log = logging.getLogger(__name__)

IDLE_RECHECK = 5.0

Clock = Callable[[], float]
OnSent = Callable[[OutboxRecord], Awaitable[None]]


class OutboundWorker(Service):
    def __init__(
        self,
        channel: Channel,
        outbox: Outbox,
        bus: Bus,
        *,
        max_attempts: int = 8,
        clock: Clock = time.time,
        drafts: DraftStreamer,
        fence: Fence | None,
    ) -> None:
        self.channel = channel
        self._outbox = outbox
        self._bus = bus
        self._max_attempts = max_attempts
        self._clock = clock
        # a turn's answer finishes the draft streamed for it; a cluster node sends only
        # while it leads (fence)
        self._delivery = Delivery(channel, outbox, drafts=drafts, fence=fence, clock=clock)
        self._in_flight: dict[str, asyncio.Task[None]] = {}
        # Sent, but the store was away when the result was to be recorded: recorded once it
        # is back, never sent again (a resend could not tell it was delivered).
        self._unrecorded: dict[int, Delivered] = {}
        self._loop_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self._loop_task is None:
            self._loop_task = asyncio.create_task(self._run(), name=f"outbox:{self.channel.name}")

    async def stop(self, *, flush_timeout: float = 5.0) -> None:
        """Give messages already in flight a moment to finish, then stop."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
            self._loop_task = None
        tasks = list(self._in_flight.values())
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=flush_timeout)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def _run(self) -> None:
        name = self.channel.name
        while True:
            now = self._clock()
            wake_at: float | None = None
            # A snapshot of the chats being sent: the read runs on the store's thread.
            try:
                heads = await self._outbox.heads(name, skip=frozenset(self._in_flight))
            except StoreUnavailable as exc:  # the database is away: read again later
                log.warning("%s: cannot read the outbox now: %s", name, exc)
                await self._bus.wait_outbound(name, IDLE_RECHECK)
                continue
            for record in heads:
                key = record.message.chat.session_key
                if key in self._in_flight:
                    continue
                if record.due_at <= now:
                    self._in_flight[key] = asyncio.create_task(self._deliver(key, record))
                elif wake_at is None or record.due_at < wake_at:
                    wake_at = record.due_at
            # Re-read at least every few seconds: another process (the CLI approving a
            # pairing, say) may have queued a message without waking us.
            timeout = (
                IDLE_RECHECK if wake_at is None else min(IDLE_RECHECK, max(0.0, wake_at - now))
            )
            await self._bus.wait_outbound(name, timeout)

    async def _deliver(self, key: str, record: OutboxRecord) -> None:
        look_again = True
        try:
            sent = self._unrecorded.get(record.id)
            if sent is not None:
                look_again = await self._record_sent(record, sent)
            else:
                look_again = await self._attempt(record)
        finally:
            self._in_flight.pop(key, None)
            if look_again:  # this chat's next message, or a new due time
                self._bus.outbound_ready(self.channel.name)
            await self._bus.progressed()

    async def _attempt(self, record: OutboxRecord) -> bool:
        """One delivery attempt; returns whether the worker should read the queue again
        (not after a delivery that left its chat with nothing waiting)."""
        message = record.message
        try:
            delivered = await self._delivery.attempt(record)
        except ChannelRateLimited as exc:
            log.info(
                "%s rate-limited chat %s for %.1fs",
                self.channel.name,
                message.chat_id,
                exc.retry_after,
            )
            await self._outbox.hold_chat(
                self.channel.name, message.chat.session_key, self._clock() + exc.retry_after
            )
        except ChannelPermanentError as exc:
            log.warning("%s: giving up on message %s: %s", self.channel.name, record.id, exc)
            await self._outbox.mark_failed(record.id, str(exc))
            self._delivery.forget(record.id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # transient or unknown: retry with backoff
            if record.attempts + 1 >= self._max_attempts:
                log.error(  # noqa: TRY400 - the traceback adds nothing here
                    "%s: message %s failed %d times: %s",
                    self.channel.name,
                    record.id,
                    record.attempts + 1,
                    exc,
                )
                await self._outbox.mark_failed(record.id, str(exc))
                self._delivery.forget(record.id)
            else:
                delay = backoff_delay(record.attempts)
                log.warning(
                    "%s: send failed (%s); retrying in %.1fs", self.channel.name, exc, delay
                )
                await self._outbox.retry_later(record.id, delay, str(exc))
        else:
            if delivered is None:  # not ours to send (any more): leave the row alone
                return False
            self._delivery.forget(record.id)
            return await self._record_sent(record, delivered)
        return True

    async def _record_sent(self, record: OutboxRecord, delivered: Delivered) -> bool:
        """Record a send that went out; while the store is away, keep it to record later."""
        try:
            look_again = await self._outbox.mark_sent(
                record.id, delivered.receipt, finished_draft=delivered.finished_draft
            )
        except StoreUnavailable as exc:
            if record.id not in self._unrecorded:
                log.warning(
                    "%s: message %s went out; the store is away (%s): recorded once it is back",
                    self.channel.name,
                    record.id,
                    exc,
                )
            self._unrecorded[record.id] = delivered
            return True
        self._unrecorded.pop(record.id, None)
        return look_again
