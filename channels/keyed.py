"""One lock per key (a chat, a conversation), forgotten as soon as nobody holds or waits on it.

Channels that receive a chat's messages concurrently (Discord's gateway events, Slack's
Socket Mode and HTTP events, WhatsApp's webhook bodies) must journal them one at a time and
in arrival order, or a later message could take an earlier one's place in the turn. asyncio
locks wake their waiters in FIFO order, so a lock per chat keeps the order; keeping one
for every chat ever seen would grow without bound, hence the count of users per key.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class KeyedLocks:
    """``async with locks(key):`` runs one holder per key at a time, in arrival order."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}  # key -> lock, users

    @contextlib.asynccontextmanager
    async def __call__(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.setdefault(key, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if users[0] == 0:
                del self._locks[key]

    def __len__(self) -> int:
        """Keys held or waited on now (the others are forgotten)."""
        return len(self._locks)
