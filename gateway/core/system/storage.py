"""Writes that wait for disk space instead of failing: a finished step of a turn (a tool
result, the final answer) exists only in memory, so losing the write would lose the work.

:func:`until_stored` retries a write that failed with :class:`StorageFullError` with capped,
jittered backoff until the disk takes it, telling a :class:`StorageAlarm` (the runtime's
storage-full watch: one ERROR per outage, one line when it ends). Any other error is raised.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from gateway.core.backoff import Backoff
from gateway.core.errors import StorageFullError

RETRY_BASE, RETRY_CAP = 0.2, 5.0  # seconds: the first retries are quick, then every ≤5 s

T = TypeVar("T")


class StorageAlarm(Protocol):
    def blocked(self) -> None:
        """A write failed because the disk is full."""

    def accepted(self) -> None:
        """A write succeeded (after failures: the outage is over)."""


async def until_stored(
    write: Callable[[], Awaitable[T]],
    alarm: StorageAlarm | None = None,
    *,
    backoff: Backoff | None = None,
) -> T:
    """Run ``write`` until the disk takes it."""
    backoff = backoff or Backoff(base=RETRY_BASE, cap=RETRY_CAP)
    while True:
        try:
            result = await write()
        except StorageFullError:
            if alarm is not None:
                alarm.blocked()
            await asyncio.sleep(backoff.next())
            continue
        if backoff.attempts and alarm is not None:
            alarm.accepted()
        return result
