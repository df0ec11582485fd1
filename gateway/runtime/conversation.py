"""The dispatcher's turn handler: journal the turn, answer it, commit exactly once.

For each batch it opens (or resumes) a turn in the journal, answers commands itself, hands
everything else to the agent while the chat shows "typing", then commits the outcome in one
transaction: history final, replies queued, inbound done.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from agent.llm.metered import person
from agent.loop import AgentLoop
from agent.turn import TurnKind, TurnOutcome, TurnRequest
from gateway.core.addressing import (
    AGENT_CHANNEL,
    DEFAULT_AGENT,
    agent_chat,
    agent_of,
    agent_pair,
    qualify,
)
from gateway.core.messages import (
    ChatRef,
    ChatType,
    InboundMessage,
    OutboundKind,
    OutboundMessage,
    new_id,
)
from gateway.core.principal import Principal
from gateway.core.storage import StorageAlarm, until_stored
from gateway.runtime.accounting import turn_usage
from gateway.runtime.agent_channel import is_reply
from gateway.runtime.approvals import ApprovalDesk
from gateway.runtime.autopilot import AutopilotRun
from gateway.runtime.budget import UserBudget
from gateway.runtime.commands import Commands
from gateway.runtime.dispatcher import TurnBatch
from gateway.runtime.local_bus import Bus
from gateway.store import NewMessage, OpenTurn, Store

log = logging.getLogger(__name__)

SYSTEM_CHANNEL = "system"  # internal messages: background task results

PrincipalResolver = Callable[[InboundMessage], Principal]
Typing = Callable[[ChatRef], AbstractAsyncContextManager[None]]
# Hooks a turn up to its chat's live display (streamed text, tools); see Gateway._watch.
Watch = Callable[[TurnRequest], Awaitable[TurnRequest]]
TurnEnded = Callable[[ChatRef, str, bool], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class AgentRoute:
    """Where a turn's answer goes, as whom it acts, and whose words authorise its effects
    (``None``: the messages' own authors, for a person's chat)."""

    chat: ChatRef
    principal: Principal
    echo_to: str | None = None
    authorising_texts: tuple[str, ...] | None = None
    tainted: bool = False


# Another program's message (a webhook, the API; gateway/runtime/connect.py): where its
# answer goes, as whom the turn acts, whose words authorise it; None for every other message.
ProgramRoute = Callable[[InboundMessage], Awaitable[AgentRoute | None]]


@contextlib.asynccontextmanager
async def no_typing(chat: ChatRef) -> AsyncIterator[None]:
    yield


async def no_turn_end(chat: ChatRef, turn_id: str, answered: bool) -> None:
    return None


class Conversations:
    def __init__(
        self,
        *,
        store: Store,
        bus: Bus,
        agents: Mapping[str, AgentLoop],
        commands: Commands,
        principal_for: PrincipalResolver,
        typing: Typing = no_typing,
        watch: Watch | None = None,
        turn_ended: TurnEnded = no_turn_end,
        budget: UserBudget | None = None,
        max_resume_attempts: int = 2,
        approvals: ApprovalDesk | None = None,
        storage_full: StorageAlarm | None = None,
        program_route: ProgramRoute | None = None,
    ) -> None:
        self._store = store
        self._program_route = program_route
        self._storage_full = storage_full  # told when a commit waits for disk space
        self._bus = bus
        self._agents = agents
        self._commands = commands
        self._principal_for = principal_for
        self._typing = typing
        self._watch = watch
        self._turn_ended = turn_ended
        self._budget = budget
        self._max_resume_attempts = max_resume_attempts
        self._approvals = approvals  # parks turns that wait for an approval
        self.turn_finished = asyncio.Condition()
        # Turns opened for batches still being handled (by id of the batch), so that a batch
        # whose handling fails is closed under the turn it already has.
        self._opened: dict[int, str] = {}

    async def handle(self, batch: TurnBatch) -> OpenTurn | None:
        """Answer a batch; returns the turn instead when it waits for an approval."""
        if batch.autopilot is not None:
            await self._autopilot(batch.autopilot)
            return None
        if not batch.records:  # an autopilot turn cut by a restart: nothing to answer
            assert batch.resume is not None
            await self._commit(batch.resume.id, batch.session_key, TurnOutcome(failed=True))
            return None
        last = batch.records[-1].message
        if last.channel == SYSTEM_CHANNEL:
            await self._system(batch)
            return None
        agent = self._agent_for(batch.session_key)
        program = await self._program_route(last) if self._program_route else None
        route = program or AgentRoute(last.chat, self._principal_for(last))
        if last.channel == AGENT_CHANNEL:
            route = await self._agent_message_route(last, agent.config.agent_id)
        request = TurnRequest(
            turn_id=batch.resume.id if batch.resume else new_id(),
            session_key=batch.session_key,
            chat=route.chat,
            principal=route.principal,
            kind=TurnKind.CHAT,
            messages=tuple(r.message for r in batch.records),
            resumed=batch.resume is not None,
            authorising_texts=route.authorising_texts,
            tainted=route.tainted,
        )
        if self._watch is not None:
            request = await self._watch(request)
        if batch.resume is None:
            await self._store.journal.start_turn(
                request.turn_id, request.session_key, "chat", [r.id for r in batch.records]
            )
            self._opened[id(batch)] = request.turn_id
        elif not batch.continued:  # cut by a crash or a stop (not woken by an approval)
            attempts = await self._store.journal.retry_turn(request.turn_id)
            if attempts > self._max_resume_attempts + 1:
                log.warning(
                    "turn %s interrupted %d times; giving up", request.turn_id, attempts - 1
                )
                await self._commit(request.turn_id, request.session_key, agent.interrupted(request))
                return None
        log.debug("turn %s for %s: %.200s", request.turn_id, request.session_key, last.text)
        if (
            len(batch.records) == 1
            and last.channel != AGENT_CHANNEL
            and self._commands.handles(last)
        ):
            text = await self._commands.run(last, request.principal, request.session_key)
            reply = OutboundMessage.reply_to(
                last, text, turn_id=request.turn_id, idempotency_key=f"{request.turn_id}:reply"
            )
            outcome = TurnOutcome((reply,), final_text=text)
        elif batch.resume is None and (refusal := await self._over_budget(request)) is not None:
            outcome = refusal
        else:
            outcome = await self._run_agent(agent, request, last)
            if outcome.awaiting is not None and self._approvals is not None:
                self._opened.pop(id(batch), None)
                usage = turn_usage(request.session_key, person(request.principal), outcome.usage)
                parked = await self._approvals.park(request, outcome.awaiting, batch.records, usage)
                await self._turn_ended(request.chat, request.turn_id, True)  # a notice is queued
                return parked
        await self._commit(
            request.turn_id,
            request.session_key,
            outcome,
            last_chat=last if program is None and _is_owner_dm(last, request.principal) else None,
            echo_to=route.echo_to,
            principal=request.principal,
        )
        self._opened.pop(id(batch), None)
        chat = request.chat
        answered = any(
            r.channel == chat.channel and r.chat_id == chat.chat_id for r in outcome.replies
        )
        await self._turn_ended(chat, request.turn_id, answered)
        return None

    async def _run_agent(
        self, agent: AgentLoop, request: TurnRequest, last: InboundMessage
    ) -> TurnOutcome:
        async with self._typing(request.chat):
            outcome = await agent.run_turn(request)
        if outcome.read_untrusted and last.channel == AGENT_CHANNEL and last.thread_id:
            # Its answer may carry what it read: the rest of the exchange is tainted.
            await self._store.agent_conversations.taint(last.thread_id)
        return outcome

    async def _over_budget(self, request: TurnRequest) -> TurnOutcome | None:
        """The outcome of a new turn the person's allowance does not cover (a resumed or
        approval-woken turn was admitted when it began: it is not checked again)."""
        if self._budget is None:
            return None
        return await self._budget.refused(
            request.principal, request.chat, request.turn_id, reply_to=request.messages[-1]
        )

    def _agent_for(self, session_key: str) -> AgentLoop:
        """The agent owning a session (the default agent for one no longer configured)."""
        return self._agents.get(agent_of(session_key)) or self._agents[DEFAULT_AGENT]

    async def _agent_message_route(self, msg: InboundMessage, me: str) -> AgentRoute:
        """Where an agent-to-agent message's answer goes, as whom the turn acts, and whose
        words authorise its side effects (the person's who started the exchange, never the
        other agent's).

        A request is answered back to the agent that sent it; a reply is turned into an
        answer for the person who started the exchange (and recorded in their session)."""
        conversation = await self._store.agent_conversations.get(msg.thread_id or "")
        if conversation is None:  # unknown conversation: answer nobody but the sender
            sender, _ = agent_pair(msg.chat_id)
            return AgentRoute(
                ChatRef(AGENT_CHANNEL, agent_chat(me, sender), msg.thread_id),
                Principal(AGENT_CHANNEL, sender),
                authorising_texts=(),
                tainted=True,
            )
        owner = conversation.principal
        principal = Principal(
            owner["channel"],
            owner["sender_id"],
            owner.get("sender_name", ""),
            owner.get("role", "member"),
            ChatType(owner.get("chat_type", "dm")),
        )
        said, tainted = conversation.authorised_by, conversation.tainted
        if is_reply(msg):
            echo = qualify(me, conversation.origin.session_key)
            return AgentRoute(conversation.origin, principal, echo, said, tainted)
        sender, _ = agent_pair(msg.chat_id)
        chat = ChatRef(AGENT_CHANNEL, agent_chat(me, sender), msg.thread_id)
        return AgentRoute(chat, principal, None, said, tainted)

    async def _autopilot(self, run: AutopilotRun) -> None:
        """A heartbeat or scheduled job: a fixed message, or a turn without a person waiting."""
        turn_id = new_id()
        try:
            await self._store.journal.start_turn(turn_id, run.session_key, run.kind, [])
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
                outcome = TurnOutcome((message,), final_text=run.message)
            elif self._budget is not None and (
                refused := await self._budget.refused(  # a job runs on its owner's allowance
                    run.principal, run.chat, turn_id, prefix="A scheduled job was skipped. "
                )
            ):
                outcome = refused
            else:
                request = TurnRequest(
                    turn_id=turn_id,
                    session_key=run.session_key,
                    chat=run.chat,
                    principal=run.principal,
                    kind=TurnKind(run.kind),
                    prompt=run.prompt,
                    task_type=run.task_type,
                    history_limit=run.history_limit,
                    authorising_texts=run.authorising_texts,
                    tainted=run.tainted,
                )
                outcome = await self._agent_for(run.session_key).run_turn(request)
            echo = qualify(agent_of(run.session_key), run.chat.session_key)
            await self._commit(
                turn_id,
                run.session_key,
                outcome,
                echo_to=echo,
                finished_job=run.job_id,
                principal=run.principal,  # a job's model calls count against its owner
            )
        finally:
            run.done.set()

    async def _system(self, batch: TurnBatch) -> None:
        """A background task finished: deliver its result without a model call."""
        record = batch.records[0]
        turn_id = batch.resume.id if batch.resume else new_id()
        if batch.resume is None:
            await self._store.journal.start_turn(turn_id, batch.session_key, "system", [record.id])
        task_id = record.message.platform_message_id.removeprefix("subagent:")
        task = await self._store.tasks.get(task_id)
        replies: tuple[OutboundMessage, ...] = ()
        if task is not None:
            replies = (
                OutboundMessage(
                    channel=task.chat.channel,
                    chat_id=task.chat.chat_id,
                    thread_id=task.chat.thread_id,
                    text=record.message.text,
                    kind=OutboundKind.PROACTIVE,
                    turn_id=turn_id,
                    idempotency_key=f"{turn_id}:proactive",
                ),
            )
        outcome = TurnOutcome(replies, final_text=record.message.text)
        echo = qualify(task.agent, task.chat.session_key) if task else None
        await self._commit(turn_id, batch.session_key, outcome, echo_to=echo)

    async def abandon(self, batch: TurnBatch, error: BaseException) -> None:
        turn_id = batch.resume.id if batch.resume else self._opened.pop(id(batch), None)
        if turn_id is None:
            turn_id = new_id()
            await self._store.journal.start_turn(
                turn_id, batch.session_key, "chat", [r.id for r in batch.records]
            )
        replies: tuple[OutboundMessage, ...] = ()
        if batch.records:
            last = batch.records[-1].message
            text = "Sorry, something went wrong on my side while answering. It has been logged."
            replies = (
                OutboundMessage.reply_to(
                    last,
                    text,
                    kind=OutboundKind.NOTICE,
                    turn_id=turn_id,
                    idempotency_key=f"{turn_id}:notice",
                ),
            )
        await self._commit(turn_id, batch.session_key, TurnOutcome(replies, failed=True))

    async def _commit(
        self,
        turn_id: str,
        session_key: str,
        outcome: TurnOutcome,
        *,
        last_chat: InboundMessage | None = None,
        echo_to: str | None = None,
        finished_job: str | None = None,
        principal: Principal | None = None,
    ) -> None:
        """Commit the turn in one transaction (retried while the disk is full). ``last_chat``
        is where the user was last active (the heartbeat's default target); ``echo_to`` also
        writes what was delivered into that chat's history, for later replies there."""
        echo = [
            (echo_to, NewMessage("assistant", {"role": "assistant", "content": r.text}))
            for r in outcome.replies
            if echo_to is not None
        ]
        usage = turn_usage(
            session_key, None if principal is None else person(principal), outcome.usage
        )
        await until_stored(  # the disk may be full: the outcome waits in memory, once
            lambda: self._store.commit_turn(
                turn_id=turn_id,
                session_key=session_key,
                replies=outcome.replies,
                state="failed" if outcome.failed else "done",
                last_chat=None if last_chat is None else _chat_record(last_chat),
                usage=usage,
                history_extra=echo,
                finished_job=finished_job,
            ),
            self._storage_full,
        )
        for channel in {r.channel for r in outcome.replies}:  # wake their outbox workers
            self._bus.outbound_ready(channel)
        async with self.turn_finished:
            self.turn_finished.notify_all()


def _is_owner_dm(msg: InboundMessage, principal: Principal) -> bool:
    """Only the owner's own direct chat becomes the heartbeat's home: a check-in runs
    with the owner's rights, so it must never land in someone else's chat or a group."""
    return (
        msg.channel != AGENT_CHANNEL
        and principal.role == "owner"
        and principal.chat_type is ChatType.DM
    )


def _chat_record(msg: InboundMessage) -> dict[str, str | None]:
    keys = ("channel", "chat_id", "thread_id")
    return {**{k: getattr(msg, k) for k in keys}, "chat_type": msg.chat_type.value}
