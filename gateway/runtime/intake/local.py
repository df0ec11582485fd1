"""One process's intake: journaled messages and approval decisions to the dispatcher.

Every message the bus journals is queued to its session (the router decides which agent's
session it joins); every approval decided wakes its parked turn. At start, what the previous
run left open is taken on: turns cut short resume from their checkpoints, turns waiting for
an approval stay parked (refused first if they expired meanwhile), and messages no turn took
are queued again. (In a cluster, :mod:`gateway.runtime.cluster.work` does this per session,
as each node takes it.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from itertools import groupby

from gateway.core.lifecycle import Service
from gateway.core.messages import InboundMessage
from gateway.runtime.bus import Bus
from gateway.runtime.dispatch.dispatcher import Dispatcher, SessionBacklog
from gateway.runtime.turns.approvals import Approvals
from gateway.store import InboundRecord, Journal

log = logging.getLogger(__name__)


class Intake(Service):
    def __init__(
        self,
        bus: Bus,
        dispatcher: Dispatcher,
        *,
        journal: Journal,
        approvals: Approvals,
        session_of: Callable[[InboundMessage], str],
    ) -> None:
        self._bus = bus
        self._dispatcher = dispatcher
        self._journal = journal
        self._approvals = approvals
        self._session_of = session_of  # routing: which agent's session a message joins
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        await self._resume_open_work()
        self._tasks = [
            asyncio.create_task(self._messages(), name="intake-messages"),
            asyncio.create_task(self._decisions(), name="intake-decisions"),
        ]

    async def stop(self) -> None:
        """Take nothing more on. What was journaled meanwhile still reaches the dispatcher,
        which by now only applies a ``/stop`` (the turns' drain) and leaves the rest pending
        in the journal for the next start."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for record in self._bus.taken_in():
            self._dispatcher.enqueue(self._session_of(record.message), [record])

    async def _messages(self) -> None:
        while True:
            record = await self._bus.next_inbound()
            self._dispatcher.enqueue(self._session_of(record.message), [record])

    async def _decisions(self) -> None:
        while True:
            self._dispatcher.wake(await self._bus.next_wake())

    async def _resume_open_work(self) -> None:
        await self._approvals.expire_due()  # those resume now, refused
        work = await self._journal.open_work()
        waiting = await self._approvals.waiting_turns()  # they stay parked
        if work.pending or work.running:
            log.info(
                "resuming %d interrupted turn(s) and %d waiting message(s)",
                len(work.running),
                len(work.pending),
            )
        parked = frozenset(t.id for t in work.running if t.id in waiting)
        pending: dict[str, list[InboundRecord]] = {}
        for record in work.pending:
            pending.setdefault(self._session_of(record.message), []).append(record)
        for key, turns in groupby(
            sorted(work.running, key=lambda t: t.session_key), lambda t: t.session_key
        ):
            # with its waiting messages: a /stop among them closes the turn left running
            # instead of resuming it (gateway/runtime/dispatch/controls.py)
            backlog = SessionBacklog(tuple(turns), parked, tuple(pending.pop(key, ())))
            self._dispatcher.adopt(key, backlog)
        for key, records in pending.items():
            self._dispatcher.enqueue(key, records)
