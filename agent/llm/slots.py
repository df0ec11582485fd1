"""The calls one model endpoint takes at once, shared by the whole gateway, people first.

``limits.max_concurrent_llm_calls`` caps the calls to one endpoint (provider and base URL):
a local server with one slot answers one request at a time. Work nobody waits for
(reflection after a turn, a summary in the background) must never keep a person waiting
for that slot, so a call is either a person's or *background*:

- a person's call is served before every background call that waits;
- a background call takes a slot only when it is free and no person's call waits;
- a person's call that finds every slot taken while a background call holds one *cuts*
  that call: the background call is cancelled (its HTTP request closed; a streamed answer
  lets the server stop at once) and gives its slot up, and the person's call has it next.
  :class:`~agent.llm.metered.MeteredModel` asks the cut call again from the start once a
  slot is free and no person waits.

Whether a call is background travels with the task that makes it (:data:`BACKGROUND`), so
a fallback chain's candidates, each behind its own endpoint's slots, see it too.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator
from contextvars import ContextVar

# Set (in the task of one background call) by MeteredModel: the slots it takes may be cut.
BACKGROUND: ContextVar[bool] = ContextVar("background_model_call", default=False)


class ModelSlots:
    """One endpoint's slots (``limit`` calls at once)."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._busy = 0
        self._people: deque[asyncio.Future[None]] = deque()
        self._background: deque[asyncio.Future[None]] = deque()
        self._holders: list[asyncio.Task[object]] = []  # background calls holding a slot
        self._cutting: set[asyncio.Task[object]] = set()  # of them, cut and not yet gone

    @property
    def busy(self) -> int:
        """Slots held now."""
        return self._busy

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        """One slot, for the duration of one call (background if :data:`BACKGROUND` is set
        in this task)."""
        background = BACKGROUND.get()
        task = asyncio.current_task()
        await self._acquire(background)
        if background and task is not None:
            self._holders.append(task)
        try:
            yield
        finally:
            if background and task is not None:
                self._holders.remove(task)
                self._cutting.discard(task)
            self._release()

    async def _acquire(self, background: bool) -> None:
        queue = self._background if background else self._people
        ahead = self._people or (background and self._background)
        if self._busy < self.limit and not ahead:
            self._busy += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue.append(waiter)
        if not background:
            self._cut_for_people()
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # the slot came just as the caller gave up: pass it on
            else:
                with contextlib.suppress(ValueError):
                    queue.remove(waiter)
            raise

    def _cut_for_people(self) -> None:
        """One background call cut for each person's call that waits, as far as there are
        background calls holding slots (the latest to start first: it has done least)."""
        for holder in reversed(self._holders):
            if len(self._cutting) >= len(self._people):
                return
            if holder not in self._cutting:
                self._cutting.add(holder)
                holder.cancel()

    def _release(self) -> None:
        self._busy -= 1
        for queue in (self._people, self._background):
            while queue:
                waiter = queue.popleft()
                if not waiter.done():
                    self._busy += 1
                    waiter.set_result(None)
                    return


class EndpointSlots:
    """One :class:`ModelSlots` per provider endpoint, shared by the whole gateway."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._slots: dict[str, ModelSlots] = {}

    def for_endpoint(self, endpoint: str) -> ModelSlots:
        return self._slots.setdefault(endpoint, ModelSlots(self._limit))
