"""A background task finished: its result goes to the chat that asked, without a model call.

The task's result arrives as a message on the internal ``system`` channel (journaled like
any message, so it is delivered once across crashes); it is sent as it is to the chat the
task was started from, and recorded in that chat's history for later replies.
"""

from __future__ import annotations

from agent.request import TurnOutcome
from gateway.core.addressing import qualify
from gateway.core.messages import OutboundKind, OutboundMessage
from gateway.core.turns import TurnKind
from gateway.runtime.dispatch.dispatcher import TurnBatch, TurnStart
from gateway.runtime.turns.commit import Commit, TurnCommitter
from gateway.store import Journal, Tasks


class TaskResultTurns:
    def __init__(self, *, journal: Journal, tasks: Tasks, committer: TurnCommitter) -> None:
        self._journal = journal
        self._tasks = tasks
        self._committer = committer

    async def run(self, batch: TurnBatch) -> None:
        record = batch.records[0]
        turn_id = batch.turn_id
        if batch.start is TurnStart.NEW:
            await self._journal.start_turn(turn_id, batch.session_key, TurnKind.SYSTEM, [record.id])
        task_id = record.message.platform_message_id.removeprefix("subagent:")
        task = await self._tasks.get(task_id)
        if task is None:
            await self._committer.commit(turn_id, batch.session_key, TurnOutcome())
            return
        result = OutboundMessage(
            channel=task.chat.channel,
            chat_id=task.chat.chat_id,
            thread_id=task.chat.thread_id,
            text=record.message.text,
            kind=OutboundKind.PROACTIVE,
            turn_id=turn_id,
            idempotency_key=f"{turn_id}:proactive",
        )
        outcome = TurnOutcome((result,), final_text=record.message.text)
        commit = Commit(record_in=qualify(task.agent, task.chat.session_key))
        await self._committer.commit(turn_id, batch.session_key, outcome, commit)
