"""The dispatcher's turn handler: each batch to the handler of its kind."""

from __future__ import annotations

import logging

from agent.request import TurnOutcome, TurnRequest
from agent.turn.outcome import INTERNAL_ERROR_NOTICE, notice
from gateway.core.addressing import SYSTEM_CHANNEL
from gateway.core.principal import Principal
from gateway.core.turns import TurnKind
from gateway.runtime.dispatch.dispatcher import TurnBatch
from gateway.runtime.turns.chat import ChatTurns
from gateway.runtime.turns.commit import TurnCommitter
from gateway.runtime.turns.scheduled import ScheduledTurns
from gateway.runtime.turns.task_results import TaskResultTurns
from gateway.store import Journal, OpenTurn

log = logging.getLogger(__name__)


class TurnHandlers:
    def __init__(
        self,
        *,
        journal: Journal,
        chat: ChatTurns,
        scheduled: ScheduledTurns,
        task_results: TaskResultTurns,
        committer: TurnCommitter,
    ) -> None:
        self._journal = journal
        self._chat = chat
        self._scheduled = scheduled
        self._task_results = task_results
        self._committer = committer

    async def handle(self, batch: TurnBatch) -> OpenTurn | None:
        """Run the batch's turn and commit it; or return the turn when it waits for an
        approval (parked, not committed)."""
        if batch.scheduled is not None or not batch.records:
            await self._scheduled.run(batch)
            return None
        if batch.records[-1].message.channel == SYSTEM_CHANNEL:
            await self._task_results.run(batch)
            return None
        return await self._chat.run(batch)

    async def abandon(self, batch: TurnBatch, error: BaseException) -> None:
        """Close a turn whose handler failed unexpectedly: the person is told, once."""
        kind = batch.scheduled.kind if batch.scheduled is not None else TurnKind.CHAT
        await self._journal.start_turn(  # a no-op when the handler opened it already
            batch.turn_id, batch.session_key, kind, [r.id for r in batch.records]
        )
        outcome = TurnOutcome(failed=True)
        if batch.records:
            last = batch.records[-1].message
            request = TurnRequest(
                turn_id=batch.turn_id,
                session_key=batch.session_key,
                chat=last.chat,
                principal=Principal(last.channel, last.sender_id, last.sender_name),
                messages=(last,),
            )
            outcome = notice(request, INTERNAL_ERROR_NOTICE)
        await self._committer.commit(batch.turn_id, batch.session_key, outcome)
