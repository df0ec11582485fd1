"""Outbound pacing with token buckets (channels/buckets.py): bursts leave at once, only
sustained rates wait.

Platforms publish sustained limits (Telegram: about one message a second per chat, 20 a
minute per group, 30 a second overall) and tolerate short bursts above them. A leaky bucket
that spaces every message by ``1 / rate`` would hold a reply that follows the previous one
closely, although nothing was rate-limited; a token bucket lets a burst of ``burst``
messages go out without waiting and paces only what exceeds the sustained rate.

A wait that would be longer than the caller's ``max_wait`` is not slept: it raises
:class:`ChannelRateLimited`, so the outbox holds that chat and other chats go on. When the
platform itself answers 429, the outbox holds that chat for ``retry_after`` (see
gateway/runtime/outbound/worker.py); buckets do not need to know.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence

from channels.buckets import Rate, TokenBucket
from gateway.core.errors import ChannelRateLimited

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]

_MAX_BUCKETS = 10_000


class Pacer:
    """One overall bucket plus buckets per key (a chat, a group), created on first use.

    ``await pacer.acquire([("chat", chat_id, rate), ...], max_wait=5)`` returns at once while
    every bucket concerned has a token; otherwise it reserves one in each and sleeps until
    the slowest has refilled. The least recently used keyed buckets are forgotten beyond
    ``max_buckets`` (a forgotten bucket comes back full, as an idle one would be).
    """

    def __init__(
        self,
        overall: Rate | None = None,
        *,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        max_buckets: int = _MAX_BUCKETS,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._overall = TokenBucket(overall, clock()) if overall is not None else None
        self._buckets: OrderedDict[tuple[str, str], TokenBucket] = OrderedDict()
        self._max_buckets = max_buckets

    async def acquire(
        self, keys: Sequence[tuple[str, str, Rate]], *, max_wait: float, what: str = "paced"
    ) -> float:
        """Wait for a slot in every bucket named by ``keys`` (kind, key, rate) and the overall
        one; returns the seconds waited. Raises :class:`ChannelRateLimited` instead of
        waiting longer than ``max_wait``."""
        now = self._clock()
        buckets = [self._bucket(kind, key, rate, now) for kind, key, rate in keys]
        if self._overall is not None:
            buckets.append(self._overall)
        wait = max((bucket.delay(now) for bucket in buckets), default=0.0)
        if wait > max_wait:
            raise ChannelRateLimited(wait, what)
        for bucket in buckets:
            bucket.take(now)
        if wait > 0:
            await self._sleep(wait)
        return wait

    def _bucket(self, kind: str, key: str, rate: Rate, now: float) -> TokenBucket:
        name = (kind, key)
        bucket = self._buckets.get(name)
        if bucket is None or bucket.rate != rate:
            bucket = self._buckets[name] = TokenBucket(rate, now)
            while len(self._buckets) > self._max_buckets:
                self._buckets.popitem(last=False)
        self._buckets.move_to_end(name)
        return bucket
