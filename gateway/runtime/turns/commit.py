"""The end of every turn: its outcome committed in one transaction, exactly once.

In one transaction the turn's checkpoints become history, its replies go into the outbox,
its inbound messages are done and its model usage is recorded; then the outbox workers of
the replies' channels are woken and the bus notes the progress, and the owner is told when
the turn's spending passed a level of a money cap. Retried while the disk is full: the
outcome waits in memory, once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agent.llm.types import ChatMessage
from agent.memory import RecallScope
from agent.request import TurnOutcome
from gateway.core.principal import Principal
from gateway.core.system.storage import StorageAlarm, until_stored
from gateway.runtime.bus import Bus
from gateway.runtime.people.spend_notices import SpendWatch
from gateway.runtime.turns.accounting import turn_usage
from gateway.store import HomeChat, NewMessage, Store


@dataclass(frozen=True, slots=True)
class Commit:
    """What a turn's commit writes besides its outcome."""

    principal: Principal | None = None  # whose allowance its model calls count against
    home: HomeChat | None = None  # the owner's chat it ran in, when that becomes the home
    # Another session whose history also records what was delivered (an answer that went
    # to a person on behalf of an agent, a job's message), for later replies there.
    record_in: str | None = None
    finished_job: str | None = None  # a one-shot job this turn completes
    # Whose conversation the session is, for memory_search (agent/memory.py:recall_scope),
    # and whether it is a group's (the person then may search it from their own chat).
    scope: RecallScope | None = None


class TurnCommitter:
    def __init__(
        self,
        store: Store,
        bus: Bus,
        *,
        storage_full: StorageAlarm | None,
        committed: Callable[[], None] = lambda: None,
        spend: SpendWatch | None = None,
    ) -> None:
        self._store = store
        self._bus = bus
        self._storage_full = storage_full  # told when a commit waits for disk space
        self._committed = committed  # the recall indexer: new messages to embed
        self._spend = spend  # tells the owner how far the money caps are spent

    async def commit(
        self, turn_id: str, session_key: str, outcome: TurnOutcome, extra: Commit | None = None
    ) -> None:
        extra = extra or Commit()
        tainted = outcome.read_untrusted  # its answers are stored marked so (recall)
        answers = [ChatMessage("assistant", r.text, untrusted=tainted) for r in outcome.replies]
        recorded = [
            (extra.record_in, NewMessage("assistant", answer.to_body()))
            for answer in answers
            if extra.record_in is not None
        ]
        person = None if extra.principal is None else extra.principal.person
        usage = turn_usage(session_key, person, outcome.usage)
        scope = extra.scope
        await until_stored(
            lambda: self._store.commit_turn(
                turn_id=turn_id,
                session_key=session_key,
                replies=outcome.replies,
                state="failed" if outcome.failed else "done",
                home=extra.home,
                usage=usage,
                history_extra=recorded,
                finished_job=extra.finished_job,
                scope=None if scope is None else scope.key,
                member=person if scope is not None and scope.group else None,
                tainted=tainted,
            ),
            self._storage_full,
        )
        self._committed()
        for channel in {r.channel for r in outcome.replies}:  # wake their outbox workers
            self._bus.outbound_ready(channel)
        await self._bus.progressed()
        if self._spend is not None:
            await self._spend.committed(
                extra.principal, session_key, usage, home_changed=extra.home is not None
            )
