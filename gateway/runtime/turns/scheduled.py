"""A scheduled turn: a heartbeat check-in or a job, with nobody waiting for it.

A fixed message is sent as it is; a prompt runs the agent (on the job owner's allowance,
past which the run is skipped with one notice). An answer with nothing to report is not
sent. The run's ``done`` event is set whatever happens, so the scheduler can plan the next.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent.agent import Agent
from agent.request import TurnOutcome, TurnRequest
from gateway.core.addressing import agent_of, qualify
from gateway.core.messages import OutboundKind, OutboundMessage
from gateway.core.turns import TurnKind
from gateway.runtime.dispatch.dispatcher import TurnBatch
from gateway.runtime.intake.routing import agent_for
from gateway.runtime.people.budget import UserBudget
from gateway.runtime.people.zones import Zones
from gateway.runtime.schedule.runs import ScheduledRun
from gateway.runtime.turns.commit import Commit, TurnCommitter
from gateway.store import Journal


class ScheduledTurns:
    def __init__(
        self,
        *,
        journal: Journal,
        agents: Mapping[str, Agent],
        committer: TurnCommitter,
        budget: UserBudget,
        zones: Zones,
    ) -> None:
        self._journal = journal
        self._agents = agents
        self._committer = committer
        self._budget = budget
        self._zones = zones  # a job runs on its owner's clock

    async def run(self, batch: TurnBatch) -> None:
        if batch.scheduled is None:  # cut by a restart: nobody waits for it, it is not redone
            await self._committer.commit(batch.turn_id, batch.session_key, TurnOutcome(failed=True))
            return
        run = batch.scheduled
        try:
            await self._journal.start_turn(batch.turn_id, run.session_key, run.kind, [])
            outcome = await self._outcome(batch.turn_id, run)
            commit = Commit(
                principal=run.principal,  # a job's model calls count against its owner
                record_in=run.conversation
                or qualify(agent_of(run.session_key), run.chat.session_key),
                finished_job=run.job_id,
            )
            await self._committer.commit(batch.turn_id, run.session_key, outcome, commit)
        finally:
            run.done.set()

    async def _outcome(self, turn_id: str, run: ScheduledRun) -> TurnOutcome:
        if run.message is not None:
            message = OutboundMessage(
                channel=run.chat.channel,
                chat_id=run.chat.chat_id,
                thread_id=run.chat.thread_id,
                text=run.message,
                kind=OutboundKind.PROACTIVE,
                turn_id=turn_id,
                idempotency_key=f"{turn_id}:proactive",
            )
            return TurnOutcome((message,), final_text=run.message)
        # a job runs on its owner's allowance, and within the caps of background work; a
        # heartbeat's check-in skipped at a cap is told to nobody (its next tick skips it)
        agent = agent_of(run.session_key)
        admission = await self._budget.admit_turn(
            run.principal,
            run.chat,
            turn_id,
            agent=agent,
            background=True,
            prefix="A scheduled job was skipped. ",
            tell=run.kind is not TurnKind.HEARTBEAT,
        )
        if admission.refused is not None:
            return admission.refused
        request = TurnRequest(
            turn_id=turn_id,
            session_key=run.session_key,
            chat=run.chat,
            principal=run.principal,
            kind=run.kind,
            prompt=run.prompt,
            task_type=run.task_type,
            history_limit=run.history_limit,
            authorising_texts=run.authorising_texts,
            tainted=run.tainted,
            zone=await self._zones.clock_zone(run.principal.person),
            allowance=admission.allowance,
        )
        return await agent_for(self._agents, run.session_key).run_turn(request)
