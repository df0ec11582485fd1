"""The Matrix intake: ``/sync`` long polling, the since-token moved only past journaled events.

Each sync answer is handled whole before its ``next_batch`` token is stored (through the
gateway's store, :class:`gateway.core.bus.ChannelRecords`, so a cluster's next leader goes on
where the last one stopped): invites are accepted or declined, encrypted rooms are left
(nothing of theirs is read), and every message in every other joined room is converted, its
files fetched when the gate would admit it, and journaled, in the room's order. If anything
fails (a full disk), the token stays, the same sync is asked for again after a backoff, and
the journal recognises what it already has (by event id).

The very first sync (no token stored) only joins rooms (and leaves encrypted ones) and takes
the token: the history it returns was written before the bot was there, or answered by an
earlier installation.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from nio import AsyncClient, SyncError, SyncResponse

from gateway.core.backoff import Backoff
from gateway.core.bus import ChannelRecords

log = logging.getLogger(__name__)

CHANNEL = "matrix"
# Up to this many events per room and sync; more (after a long outage) is logged as a gap.
SYNC_FILTER = {"room": {"timeline": {"limit": 200}}, "presence": {"not_types": ["*"]}}

Handler = Callable[[SyncResponse, bool], Awaitable[None]]
Status = Callable[[str | None], None]


class SyncLoop:
    def __init__(
        self,
        client: AsyncClient,
        handle: Handler,
        records: ChannelRecords,
        *,
        timeout_ms: int,
        backoff: Backoff,
        on_status: Status,
    ) -> None:
        self._client = client
        self._handle = handle
        self._records = records
        self._timeout_ms = timeout_ms
        self._backoff = backoff
        self._on_status = on_status
        self._since: str | None = None
        self._task: asyncio.Task[None] | None = None
        self.synced = asyncio.Event()  # one sync answer handled since start

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="matrix-sync")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        self._since = await self._records.load_cursor(CHANNEL)
        # The first sync of this process asks for the rooms' whole state, from the stored
        # position too: without it the client knows no room's members, and a group of
        # three would count as a direct chat until someone joined or left.
        whole_state = True
        while True:
            first = self._since is None
            try:
                answer = await self._client.sync(
                    timeout=0 if first or whole_state else self._timeout_ms,
                    since=self._since,
                    sync_filter=SYNC_FILTER,
                    full_state=whole_state or None,
                )
                if isinstance(answer, SyncError):
                    self._failed(f"{answer.status_code or ''} {answer.message}".strip())
                    await asyncio.sleep(self._backoff.next())
                    continue
                await self._handle(answer, first)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._failed(str(exc) or type(exc).__name__)
                await asyncio.sleep(self._backoff.next())
                continue
            whole_state = False
            self._since = answer.next_batch
            await self._records.save_cursor(CHANNEL, answer.next_batch)
            self._backoff.reset()
            self._on_status(None)
            self.synced.set()

    def _failed(self, why: str) -> None:
        self._on_status(f"sync failed: {why}")
        log.warning("matrix: sync failed (%s); trying again", why)


def inviter(invite: Any, user_id: str) -> tuple[str | None, bool]:
    """Who invited ``user_id`` to a room (from the invite's stripped state), and whether they
    marked it a direct chat."""
    for event in getattr(invite, "invite_state", []) or []:
        # nio's invite events carry the membership as attributes (their ``source`` has
        # lost its content while being parsed)
        if (
            getattr(event, "state_key", None) == user_id
            and getattr(event, "membership", None) == "invite"
        ):
            content = getattr(event, "content", None) or {}
            return getattr(event, "sender", None), bool(content.get("is_direct"))
    return None, False
