"""Holding a platform call open: the instant of a send, for the fakes of every platform.

A test asks a fake to hold the next call that matches (a post to one chat, say). The fake
then either makes the message and keeps the answer back (``deliver=True``: the message is
in the chat, its sender never hears so) or keeps the request without making anything
(``deliver=False``: it never arrives). Meanwhile the test kills the process that sent it,
then lets go (:meth:`Hold.release`); nobody reads the answer any more. A late hold
(``late=True``) makes the message only when let go: a request slow on the wire, which
reaches the platform after whatever the test did meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass
class Hold:
    deliver: bool
    matches: Callable[[dict[str, Any]], bool]
    late: bool = False  # with deliver: made when let go, not when it arrives
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    released: asyncio.Event = field(default_factory=asyncio.Event)
    taken: bool = False

    def release(self) -> None:
        self.released.set()


class Holds:
    """The holds a fake was asked for, each taken by the first call that matches it."""

    def __init__(self) -> None:
        self._holds: list[Hold] = []

    def add(
        self, *, deliver: bool, matches: Callable[[dict[str, Any]], bool], late: bool = False
    ) -> Hold:
        hold = Hold(deliver, matches, late)
        self._holds.append(hold)
        return hold

    def take(self, facts: dict[str, Any]) -> Hold | None:
        for hold in self._holds:
            if not hold.taken and hold.matches(facts):
                hold.taken = True
                return hold
        return None

    def release_all(self) -> None:
        for hold in self._holds:
            hold.release()

    @staticmethod
    async def serve(hold: Hold, make: Callable[[], Awaitable[T]], refused: Callable[[], T]) -> T:
        """Make the message (or not), say the call arrived, and answer once let go."""
        if hold.deliver and hold.late:
            hold.arrived.set()
            await hold.released.wait()
            return await make()
        result = await make() if hold.deliver else refused()
        hold.arrived.set()
        await hold.released.wait()
        return result
