"""A clock the test moves by hand: sleepers wake when time is advanced past their deadline."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta


class FakeClock:
    def __init__(self, start: datetime) -> None:
        self._now = start
        self._sleepers: list[tuple[datetime, asyncio.Future[None]]] = []

    def now(self) -> datetime:
        return self._now

    @property
    def sleeping(self) -> int:
        return sum(1 for _, f in self._sleepers if not f.done())

    async def advance(self, **delta: float) -> None:
        """Move time forward, wake every sleeper whose deadline passed, let them run."""
        self._now += timedelta(**delta)
        for deadline, future in self._sleepers:
            if deadline <= self._now and not future.done():
                future.set_result(None)
        self._sleepers = [(d, f) for d, f in self._sleepers if not f.done()]
        for _ in range(50):  # let the woken tasks run up to their next real await
            await asyncio.sleep(0)

    async def sleep_until(self, when: datetime, wake: asyncio.Event | None = None) -> None:
        if when <= self._now:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((when, future))
        if wake is None:
            await future
            return
        woken = asyncio.ensure_future(wake.wait())
        try:
            await asyncio.wait({future, woken}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            woken.cancel()
            if not future.done():
                future.cancel()
