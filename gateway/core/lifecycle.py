"""One start/stop lifecycle for every long-lived component, usable with ``async with``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Collection
from types import TracebackType
from typing import Any, Self


class Service:
    """Subclasses implement :meth:`start` and :meth:`stop`; ``async with`` calls them."""

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


async def drain(
    tasks: Collection[asyncio.Task[Any]], within: float, *, now: asyncio.Event | None = None
) -> set[asyncio.Task[Any]]:
    """Wait up to ``within`` seconds for ``tasks`` to finish, or until ``now`` is set (the
    user asked to stop at once); return the tasks still running. Cancels nothing."""
    pending = {task for task in tasks if not task.done()}
    if not pending or now is None:
        if pending:
            _, pending = await asyncio.wait(pending, timeout=within)
        return pending
    hurry = asyncio.create_task(now.wait())
    try:
        async with asyncio.timeout(within):
            while pending and not now.is_set():
                done, _ = await asyncio.wait({*pending, hurry}, return_when=asyncio.FIRST_COMPLETED)
                pending -= done
    except TimeoutError:
        pass
    finally:
        hurry.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await hurry
    return pending


async def waited(aw: Awaitable[Any], seconds: float) -> bool:
    """Await ``aw`` for at most ``seconds``; whether it finished in time. Unlike
    ``asyncio.wait_for`` on Python 3.11, a cancellation that arrives just as ``aw``
    finishes is never swallowed (python/cpython#86296): a loop that waits so always ends
    when its task is cancelled. (The recall indexer's did not, and held a gateway's stop
    for ever when a commit woke it at the moment it was stopped.)"""
    try:
        async with asyncio.timeout(seconds):
            await aw
    except TimeoutError:
        return False
    return True
