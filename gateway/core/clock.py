"""Time as a dependency, so the scheduler and the heartbeat can be tested without waiting."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from gateway.core.lifecycle import waited

MAX_NAP = 60.0  # re-check at least this often, so wall-clock jumps are noticed


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware (UTC)."""
        ...

    async def sleep_until(self, when: datetime, wake: asyncio.Event | None = None) -> None:
        """Return at ``when``, or earlier if ``wake`` is set."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep_until(self, when: datetime, wake: asyncio.Event | None = None) -> None:
        delay = min(MAX_NAP, max(0.0, (when - self.now()).total_seconds()))
        if wake is None:
            await asyncio.sleep(delay)
            return
        await waited(wake.wait(), delay)


def seconds(clock: Clock) -> Callable[[], float]:
    """``clock``'s time as Unix seconds, for parts that count in seconds."""
    return lambda: clock.now().timestamp()


def day_start(moment: datetime) -> datetime:
    """The start of ``moment``'s day in its own zone: where the owner's day begins for
    usage, the money caps and their resets (``moment`` in ``user.timezone``). Aware
    datetimes add as wall-clock times, so ``day_start(m) + timedelta(days=1)`` is the next
    midnight also across a change to or from summer time (a day of 23 or 25 hours)."""
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)
