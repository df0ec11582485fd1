"""A chat turn: a person's messages (or another agent's), one answer.

The turn is opened in the journal (its messages become ``processing``), or, when a crash or
a stop cut it short, counted as one more attempt. A lone command is answered without the
model; a new turn past the person's allowance is refused with a notice; otherwise the agent
runs the turn while the chat shows it working (with its tokens and cost under the answer
for a person who asked for them). A turn that stops at a call waiting for approval is
parked, not committed: the dispatcher holds it until the decision.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from datetime import tzinfo

from agent.agent import Agent
from agent.memory import recall_scope
from agent.request import TurnOutcome, TurnRequest
from gateway.config.channels import ChannelSection
from gateway.core.addressing import AGENT_CHANNEL, PROGRAM_CHANNELS
from gateway.core.commands import PERSON_COMMANDS
from gateway.core.messages import ChatType, InboundMessage, OutboundKind, OutboundMessage
from gateway.core.principal import Principal
from gateway.core.turns import TurnKind
from gateway.runtime.dispatch.commands import Commands
from gateway.runtime.dispatch.dispatcher import TurnBatch, TurnStart
from gateway.runtime.dispatch.usage_text import footer
from gateway.runtime.intake.routing import agent_for
from gateway.runtime.intake.voice import SpokenReplies
from gateway.runtime.people.budget import UserBudget
from gateway.runtime.people.zones import Zones
from gateway.runtime.turns.accounting import turn_usage
from gateway.runtime.turns.approvals import Approvals
from gateway.runtime.turns.commit import Commit, TurnCommitter
from gateway.runtime.turns.live import LiveDisplay
from gateway.runtime.turns.routes import Route, Routes
from gateway.runtime.turns.set_aside import SetAside
from gateway.store import AgentConversations, HomeChat, HomeChats, Journal, OpenTurn, People
from gateway.store.home import replaces

log = logging.getLogger(__name__)


class ChatTurns:
    def __init__(
        self,
        *,
        agent_conversations: AgentConversations,
        homes: HomeChats,
        journal: Journal,
        agents: Mapping[str, Agent],
        routes: Routes,
        commands: Commands,
        display: LiveDisplay,
        committer: TurnCommitter,
        set_aside: SetAside,
        approvals: Approvals,
        budget: UserBudget,
        sections: Mapping[str, ChannelSection] | None = None,
        zones: Zones,
        people: People,
        first_turn: Callable[[str, InboundMessage], Awaitable[None]],
        spoken: SpokenReplies | None = None,
    ) -> None:
        self._agent_conversations = agent_conversations
        self._homes = homes
        self._journal = journal
        self._agents = agents
        self._routes = routes
        self._commands = commands
        self._display = display
        self._committer = committer
        self._approvals = approvals  # parks turns that wait for an approval
        self._budget = budget
        self._set_aside = set_aside  # a turn cut short too often is closed, not resumed
        self._sections = sections or {}  # each channel's followups setting
        self._known_home: HomeChat | None = None  # read once, then kept as commits change it
        self._home_read = False
        self._zones = zones  # each person's own time zone
        self._people = people  # who wants the usage footer under their answers
        self._spoken = spoken  # voice.reply = "auto": a voice note is answered aloud too
        self._first_turn = first_turn  # what a shared conversation goes on from (Linking)

    async def run(self, batch: TurnBatch) -> OpenTurn | None:
        """Answer the batch; returns the turn instead when it waits for an approval."""
        started = time.monotonic()
        last = batch.records[-1].message
        agent = agent_for(self._agents, batch.session_key)
        route = await self._routes.of(last, agent.config.agent_id)
        zone = await self._zones.clock_zone(route.principal.person)
        request = await self._display.watch(_request(batch, route, self._steers(last), zone))
        if batch.stopped:  # asked to stop before it could go on (parked, or cut by a crash)
            await self._close_stopped(batch, request, agent)
            return None
        if batch.start is TurnStart.NEW:
            first = batch.records[0].message
            if first.conversation:  # a person's one conversation: it may never have been used
                await self._first_turn(batch.session_key, first)
            ids = [r.id for r in batch.records]
            await self._journal.start_turn(batch.turn_id, batch.session_key, TurnKind.CHAT, ids)
        elif batch.start is TurnStart.RESUMED:  # cut short by a crash or a stop
            aside = await self._set_aside.resumed(request)
            if aside is not None:
                await self._committer.commit(batch.turn_id, batch.session_key, aside)
                return None
        log.debug("turn %s for %s: %.200s", batch.turn_id, batch.session_key, last.text)
        outcome = await self._outcome(batch, request, agent)
        await self._display.settle(request.chat, request.turn_id)  # no edit after the commit
        if outcome.awaiting is not None:
            usage = turn_usage(request.session_key, request.principal.person, outcome.usage)
            parked = await self._approvals.park(request, outcome.awaiting, batch.records, usage)
            await self._display.ended(request.chat, request.turn_id, answered=True)  # a notice
            return parked
        commit = Commit(
            principal=request.principal,
            home=await self._home(last, request.principal),
            record_in=route.record_in,
            scope=None
            if last.command in PERSON_COMMANDS
            else recall_scope(agent.config.agent_id, request.principal, request.chat),
        )
        await self._committer.commit(batch.turn_id, batch.session_key, outcome, commit)
        self._known_home = commit.home or self._known_home
        chat = request.chat
        answered = any(
            r.channel == chat.channel and r.chat_id == chat.chat_id for r in outcome.replies
        )
        await self._display.ended(chat, request.turn_id, answered=answered)
        if batch.control is not None and batch.control.stopping:
            ended = f"stopped by {batch.control.stopped_by}"
        else:
            ended = "failed" if outcome.failed else "answered" if answered else "ended unanswered"
        log.info(  # what, where and how much; never what was said
            "turn %s in %s (agent %s) %s: %s tokens, %.1f s",
            batch.turn_id,
            chat.session_key,
            agent.config.agent_id,
            ended,
            f"{sum(e.usage.input_tokens + e.usage.output_tokens for e in outcome.usage):,}",
            time.monotonic() - started,
        )
        return None

    async def _close_stopped(self, batch: TurnBatch, request: TurnRequest, agent: Agent) -> None:
        by = batch.control.stopped_by if batch.control and batch.control.stopped_by else "?"
        await self._approvals.withdraw(batch.turn_id, by=by)
        outcome = await agent.stopped(request)
        scope = recall_scope(agent.config.agent_id, request.principal, request.chat)
        commit = Commit(principal=request.principal, scope=scope)
        await self._committer.commit(batch.turn_id, batch.session_key, outcome, commit)
        await self._display.ended(request.chat, request.turn_id, answered=True)

    def _steers(self, msg: InboundMessage) -> bool:
        """Whether messages sent while this chat's turn runs join it (``<channel>.followups``;
        unset: in direct chats, and in groups they wait for a turn of their own)."""
        section = self._sections.get(msg.channel)
        mode = None if section is None else section.followups
        if mode is None:
            return not msg.is_group
        return mode == "steer"

    async def _outcome(self, batch: TurnBatch, request: TurnRequest, agent: Agent) -> TurnOutcome:
        last = request.messages[-1]
        if (
            len(batch.records) == 1
            and last.channel != AGENT_CHANNEL
            and self._commands.handles(last)
        ):
            text = await self._commands.run(last, request.principal, request.session_key)
            reply = OutboundMessage.reply_to(
                last, text, turn_id=request.turn_id, idempotency_key=f"{request.turn_id}:reply"
            )
            return TurnOutcome((reply,), final_text=text)
        # A resumed or approval-woken turn was admitted when it began: not checked again.
        if batch.start is TurnStart.NEW:
            admission = await self._budget.admit_turn(
                request.principal,
                request.chat,
                request.turn_id,
                agent=agent.config.agent_id,
                reply_to=last,
            )
            if admission.refused is not None:
                return admission.refused
            request = replace(request, allowance=admission.allowance)
        async with self._display.working(request.chat):
            outcome = await agent.run_turn(request)
            if self._spoken is not None and outcome.awaiting is None:
                outcome = await self._spoken.add(request, outcome)
        outcome = await self._with_footer(request, outcome)
        if outcome.read_untrusted and last.channel == AGENT_CHANNEL and last.thread_id:
            # Its answer may carry what it read: the rest of the exchange is tainted.
            await self._agent_conversations.taint(last.thread_id)
        return outcome

    async def _with_footer(self, request: TurnRequest, outcome: TurnOutcome) -> TurnOutcome:
        """The turn's tokens and cost under its answer, for a person who asked for them
        (``/usage footer on``); never in what goes to another agent or a program."""
        replies = outcome.replies
        last = next(
            (i for i in reversed(range(len(replies))) if replies[i].kind is OutboundKind.REPLY),
            None,
        )
        channel = request.chat.channel
        if last is None or channel in (AGENT_CHANNEL, *PROGRAM_CHANNELS):
            return outcome
        if not await self._people.footer(request.principal.person):
            return outcome
        text = footer(outcome.usage)
        if not text:
            return outcome
        answer = replace(replies[last], text=f"{replies[last].text}\n\n{text}")
        return replace(outcome, replies=(*replies[:last], answer, *replies[last + 1 :]))

    async def _home(self, msg: InboundMessage, principal: Principal) -> HomeChat | None:
        """The owner's own direct chat becomes the home of check-ins: a check-in runs with
        the owner's rights, so it must never land in someone else's chat or a group (nor
        in another program's: a webhook's, the API's)."""
        if msg.channel in (AGENT_CHANNEL, *PROGRAM_CHANNELS) or not principal.is_owner:
            return None
        if principal.chat_type is not ChatType.DM:
            return None
        if not self._home_read:
            self._known_home, self._home_read = await self._homes.get(), True
        candidate = HomeChat(msg.chat, msg.chat_type, principal.person)
        if candidate == self._known_home or not replaces(candidate, self._known_home):
            return None
        return candidate


def _request(batch: TurnBatch, route: Route, steer: bool, zone: tzinfo) -> TurnRequest:
    return TurnRequest(
        turn_id=batch.turn_id,
        session_key=batch.session_key,
        chat=route.chat,
        principal=route.principal,
        kind=TurnKind.CHAT,
        messages=tuple(r.message for r in batch.records),
        resumed=batch.start is not TurnStart.NEW,
        authorising_texts=route.authorising_texts,
        # Others' words came with the messages (group context, a quote): outside content.
        tainted=route.tainted or any(r.message.untrusted_context for r in batch.records),
        control=batch.control,
        steer=steer,
        zone=zone,
    )
