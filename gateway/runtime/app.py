"""Gateway: the composition root. Builds every part from Settings and runs them together.

Start order: lock the data directory (or join the cluster), open the store, requeue what a
previous run left open, start outbox workers and the dispatcher, then connect channels (so
nothing is accepted before it can be processed); stop in reverse, with a drain period.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from agent.llm.base import LLMProvider
from agent.llm.factory import configuration_problem
from agent.llm.lazy import LazyProvider
from agent.llm.metered import EndpointSlots
from agent.tools.base import Tool
from agent.tools.web import web_browser
from gateway import __version__
from gateway.config.settings import Settings
from gateway.core.addressing import DEFAULT_AGENT
from gateway.core.channel import Channel, SupportsTurnEnd
from gateway.core.clock import Clock, SystemClock
from gateway.core.lifecycle import Service
from gateway.core.logs import Redactor, secret_values
from gateway.core.messages import ChatRef, InboundMessage, OutboundMessage
from gateway.core.principal import Principal
from gateway.core.scheduling import ScheduledItem
from gateway.core.services import Services
from gateway.runtime import pairing
from gateway.runtime.access import AccessGate, principal_for
from gateway.runtime.agent_channel import AgentChannel, AgentDirectory, agent_policy
from gateway.runtime.approvals import ApprovalDesk
from gateway.runtime.assembly import agent_settings, build_agent, workspaces
from gateway.runtime.budget import UserBudget
from gateway.runtime.cluster import ClusterGuard, guard_for, resume_open_work, streaming
from gateway.runtime.commands import Commands
from gateway.runtime.connect import ProgramRoutes, program_channels
from gateway.runtime.conversation import Conversations
from gateway.runtime.dispatcher import Dispatcher
from gateway.runtime.drafts import DraftStreamer
from gateway.runtime.heartbeat import Heartbeat
from gateway.runtime.home import prepare_workspace
from gateway.runtime.live import watch_turn
from gateway.runtime.local_bus import LocalBus
from gateway.runtime.mcp import build_manager
from gateway.runtime.models import ModelPool, model_lines
from gateway.runtime.outbound import OutboundWorker
from gateway.runtime.routing import Router
from gateway.runtime.scheduler import Scheduler
from gateway.runtime.storage import store_for
from gateway.runtime.storage_full import StorageFullWatch
from gateway.runtime.subagents import Subagents
from gateway.runtime.typing_indicator import TypingIndicators
from gateway.store import PairingRequest
from gateway.web.view import ModelState, WorkInProgress

if TYPE_CHECKING:
    from gateway.runtime.cluster_work import ClusterWork
    from gateway.web import WebServer

log = logging.getLogger(__name__)


class Gateway(Service):
    def __init__(
        self,
        settings: Settings,
        *,
        channels: Sequence[Channel] = (),
        llm: LLMProvider | None = None,
        extra_tools: Sequence[Tool] = (),
        clock: Clock | None = None,
        serve_programs: bool = True,
    ) -> None:
        """``serve_programs``: webhooks and the API, when configured (``switchboard chat``
        running a gateway of its own serves neither)."""
        self.settings = settings
        self.channels: dict[str, Channel] = {c.name: c for c in channels}
        self.store = store_for(settings)
        # one process per data directory (SQLite), or a node of a cluster (PostgreSQL)
        self.guard = guard_for(settings)
        cluster = isinstance(self.guard, ClusterGuard)
        self.bus = LocalBus(
            self.store,
            storage_full=StorageFullWatch(settings.data_dir, send=self._send_direct),
            queue_inbound=not cluster,  # in a cluster any node may take a message
        )
        self.gate = AccessGate(
            self.bus, self.store, settings.channel_sections(), on_outbound=self.bus.outbound_ready
        )
        self.clock = clock or SystemClock()
        # One concurrency cap per model endpoint for everything that calls it (all agents,
        # their subagents, summaries, reflection, page condensing); one provider per model,
        # and the cooldowns of failed models (llm.fallbacks), shared by all agents.
        self.llm_slots = EndpointSlots(settings.limits.max_concurrent_llm_calls)
        self.models = ModelPool(
            self.llm_slots,
            cooldown_seconds=settings.llm.fallback_cooldown_seconds,
            clock=lambda: self.clock.now().timestamp(),
        )
        self.llm = self.models.provider(settings.llm, llm)
        if settings.agents:  # messages between agents travel on an internal channel
            agent_channel = AgentChannel(
                store=self.store, bus=self.bus, max_hops=settings.agent_messages.max_hops
            )
            self.channels[agent_channel.name] = agent_channel
        self.router = Router(settings.routes, tuple(settings.agents))
        self.mcp = build_manager(settings)  # MCP servers, shared by every agent and turn
        # One browser for every agent's web_fetch; launched by the first page that needs it.
        self.browser = web_browser(settings.tools.web)
        self.agents = {
            agent_id: build_agent(
                settings,
                agent_id=agent_id,
                store=self.store,
                bus=self.bus,
                llm=self._llm_for(agent_id, llm),
                channels=tuple(self.channels),
                extra_tools=extra_tools,
                models=self.models,
                mcp=self.mcp,
                browser=self.browser,
            )
            for agent_id in self.router.agents
        }
        self.agent = self.agents[DEFAULT_AGENT]
        self.tools = self.agent.runner.executor.registry
        self.typing = TypingIndicators(self.channels)
        streams = streaming(settings, self.guard)
        self.drafts = DraftStreamer(self.channels, self.store.drafts, enabled=streams)
        self.approvals = ApprovalDesk(
            self.store,
            settings.channel_sections(),
            clock=self.clock,
            timeout=settings.tools.approval_timeout_seconds,
            redact=Redactor(secret_values(settings)),
            on_outbound=self.bus.outbound_ready,
        )
        self.commands = Commands(
            agent_name=settings.agent.name,
            store=self.store,
            status=self._status_text,
            approvals=self.approvals,
        )
        # one allowance per person, drawn by their chats and their scheduled jobs alike
        self.budget = UserBudget(self.store.usage, self.store.audit, settings.limits)
        self.programs = ProgramRoutes(settings, self.store, self.router)  # webhooks, the API
        self.conversations = Conversations(
            store=self.store,
            bus=self.bus,
            agents=self.agents,
            commands=self.commands,
            principal_for=self._principal_for,
            typing=self.typing.show,
            watch=partial(watch_turn, self.channels, drafts=self.drafts),
            turn_ended=self._turn_ended,
            budget=self.budget,
            max_resume_attempts=settings.agent.max_resume_attempts,
            approvals=self.approvals,
            storage_full=self.bus.storage_full,
            program_route=self.programs.route,
        )
        self.dispatcher = Dispatcher(
            self.bus,
            self.conversations,
            max_active_turns=settings.limits.max_concurrent_turns,
            turn_timeout=settings.agent.turn_timeout_seconds,
            session_of=self.router.session_key,
        )
        self.approvals.wake = self.dispatcher.wake
        self.work: ClusterWork | None = None  # a cluster: sessions claimed across the nodes
        if isinstance(self.guard, ClusterGuard):
            from gateway.runtime.cluster_work import ClusterWork  # noqa: PLC0415 - psycopg

            self.work = ClusterWork(
                self.store, self.guard.membership, self.dispatcher,
                session_of=self.router.session_key, approvals=self.approvals, bus=self.bus,
                channels=tuple(self.channels), max_sessions=settings.limits.max_concurrent_turns,
            )  # fmt: skip
        self.subagents = Subagents(
            agents=self.agents,
            store=self.store,
            bus=self.bus,
            approvals=self.approvals,
            max_concurrent=settings.scheduler.max_subagents,
            timeout=settings.scheduler.subagent_timeout_seconds,
            max_resume_attempts=settings.agent.max_resume_attempts,
            resume=self.work is None,  # a cluster's nodes do not know whose task it was
        )
        # a decision wakes a background task's turn, else the chat's (the dispatcher's, or
        # in a cluster the cluster's wake, which finds the node holding it)
        self._wake_chat = self.approvals.wake
        self.approvals.wake = self._wake_turn
        programs = (
            program_channels(
                settings,
                store=self.store,
                bus=self.bus,
                routes=self.programs,
                subagents=self.subagents,
                budget=self.budget,
                agents=self.router.agents,
            )
            if serve_programs
            else []
        )
        for channel in programs:
            self.channels[channel.name] = channel
        self.scheduler = Scheduler(
            settings,
            store=self.store,
            dispatcher=self.dispatcher,
            heartbeat=Heartbeat(
                settings.heartbeat, workspace=settings.workspace_dir, store=self.store
            ),
            clock=self.clock,
        )
        directory = AgentDirectory(agent_policy(settings), self.store)
        for agent in self.agents.values():
            agent.services = Services(jobs=self.scheduler, tasks=self.subagents, agents=directory)
            agent.storage_alarm = self.bus.storage_full
        self._workers = [
            OutboundWorker(
                channel,
                self.store.outbox,
                self.bus,
                max_attempts=settings.storage.outbox_max_attempts,
                on_settled=self._notify_progress,
                drafts=self.drafts,
            )
            for channel in self.channels.values()
        ]
        self.web: WebServer | None = None  # gateway/web; started with the web chat
        self._started = False

    def _providers(self) -> list[LLMProvider]:
        """Every model provider the agents use (fallbacks included), once each."""
        return self.models.providers()

    def _llm_for(self, agent_id: str, given: LLMProvider | None) -> LLMProvider:
        """An agent's model: shared with every agent that names the same model."""
        if given is not None or agent_id == DEFAULT_AGENT:
            return self.llm
        own = agent_settings(self.settings, agent_id).llm
        return self.models.provider(own, setting=f"agents.{agent_id}")

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        await self.guard.acquire()  # the data directory's lock, or a cluster joined
        try:
            for workspace in workspaces(self.settings).values():
                prepare_workspace(workspace)  # a new agent's workspace starts from the template
            await self.store.start()
            if self.work is None:
                await resume_open_work(self.store, self.approvals, self.dispatcher, self.bus)
            else:  # a node runs turns at once; the rest once it leads (a standby waits here)
                await self.dispatcher.start()
                await self.work.start()
                await self.guard.lead()
                await self.approvals.expire_due()
            for worker in self._workers:
                await worker.start()
            await self.dispatcher.start()
            if self.mcp is not None:  # before anything can start a turn
                await self.mcp.start()
            await self.subagents.recover()
            await self.scheduler.start()
            await self.approvals.start()
            for channel in self.channels.values():
                await channel.start(self.gate)
            for provider in self._providers():
                if isinstance(provider, LazyProvider):
                    # import the model SDK now, on a thread, once the channels listen
                    provider.warm()
            if self.settings.web.enabled:
                from gateway.web import start_web  # noqa: PLC0415 - aiohttp only when serving

                self.web = await start_web(self)
        except BaseException:
            await self._shutdown()
            raise
        self._started = True
        log.info(
            "Switchboard %s ready (channels: %s)", __version__, ", ".join(self.channels) or "none"
        )
        problem = configuration_problem(self.settings.llm)
        if isinstance(self.llm, LazyProvider) and problem is not None:
            log.warning("%s", problem.explain())  # every turn will say so; say it now too

    async def stop(self, *, drain_timeout: float = 10.0, now: asyncio.Event | None = None) -> None:
        """Stop; running turns get ``drain_timeout`` seconds to finish, or less once ``now``
        is set (a second Ctrl-C). A turn cut short resumes at the next start."""
        await self._shutdown(drain_timeout=drain_timeout, now=now)

    async def _shutdown(
        self, *, drain_timeout: float = 10.0, now: asyncio.Event | None = None
    ) -> None:
        self._started = False
        if self.web is not None:  # first: no new web requests while the rest stops
            await self.web.stop()
            self.web = None
        for channel in self.channels.values():
            try:
                await channel.stop()
            except Exception:
                log.exception("channel %s did not stop cleanly", channel.name)
        await self.scheduler.stop()
        await self.approvals.stop()
        await self.subagents.stop(drain_timeout=drain_timeout, now=now)
        if self.work is not None:  # first: no session is taken on while the turns drain
            await self.work.stop()
        await self.dispatcher.stop(drain_timeout=drain_timeout, now=now)
        await self.drafts.stop()
        await self.typing.stop()
        for worker in self._workers:
            await worker.stop()
        for agent in self.agents.values():
            await agent.stop()
        if self.mcp is not None:  # after the turns that use the servers
            await self.mcp.stop()
        if self.browser is not None:
            await self.browser.stop()
        for provider in self._providers():
            with contextlib.suppress(Exception):
                await provider.aclose()
        await self.store.stop()
        await self.guard.release()

    # -- what the web server sees (gateway.web.view.GatewayView) ---------------------------

    def work_in_progress(self) -> WorkInProgress:
        return WorkInProgress(self.dispatcher.running_turns, self.dispatcher.queued_messages)

    def schedule(self) -> list[ScheduledItem] | None:
        return self.scheduler.snapshot()

    def model_states(self) -> list[ModelState]:
        return self.models.states()

    async def decide_pairing(self, code: str, *, approve: bool, by: str) -> PairingRequest | None:
        decide = pairing.approve if approve else pairing.deny
        request = await decide(self.store, code, by=by)
        if request is not None:
            self.bus.outbound_ready(request.channel)  # deliver the welcome now
        return request

    # -- waiting and status ---------------------------------------------------------------

    async def wait_idle(self, channel: str | None = None) -> None:
        """Return once no message of ``channel`` is waiting, running or unsent.

        Bound it with ``asyncio.timeout`` at the call site when needed.
        """
        condition = self.conversations.turn_finished
        while True:
            async with condition:
                if await self._is_idle(channel):
                    return
                # Woken by every commit and every settled send; the periodic re-check
                # covers a notification that raced the idle check above.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(condition.wait(), 1.0)

    async def _is_idle(self, channel: str | None) -> bool:
        open_inbound = await self.store.journal.open_count(channel)
        unsent = await self.store.outbox.pending_count(channel)
        return open_inbound == 0 and unsent == 0

    async def _notify_progress(self) -> None:
        async with self.conversations.turn_finished:
            self.conversations.turn_finished.notify_all()

    async def _status_text(self, msg: InboundMessage, principal: Principal, session: str) -> str:
        counts = await self.store.journal.counts()
        history = await self.store.history.message_count(session)
        unsent = await self.store.outbox.pending_count()
        lines = [
            f"Switchboard {__version__} · model {self.settings.llm.model} ({self.settings.llm.provider})",
            f"Channels: {', '.join(self.channels) or 'none'}",
            # This /status runs as a turn of its own: count the others.
            f"Other turns running: {max(0, self.dispatcher.running_turns - 1)} · messages waiting: "
            f"{counts.get('pending', 0)} · replies unsent: {unsent}",
            f"This conversation: {history} messages in context",
            *model_lines(self.models.states(), now=self.clock.now().timestamp()),
        ]
        # What others asked for (task prompts, jobs) is for the owner and admins, in DMs.
        if principal.is_admin and not msg.is_group:
            lines.extend(self._background_lines())
        return "\n".join(lines)

    def _background_lines(self) -> list[str]:
        lines = [
            f"Background task {t.id} ({t.task_type}): {t.prompt[:80]}"
            for t in self.subagents.running()
        ]
        jobs = [item for item in self.scheduler.snapshot() if item.kind == "cron"]
        if jobs:
            lines.append(
                f"Scheduled jobs: {len(jobs)} (next: {min(j.next_run for j in jobs if j.next_run):%Y-%m-%d %H:%M %Z})"
            )
        return lines

    # -- wiring helpers -------------------------------------------------------------------

    def _wake_turn(self, turn_id: str) -> None:
        """An approval was decided: resume the turn waiting for it (a background task's, or
        a chat's)."""
        if not self.subagents.wake(turn_id):
            self._wake_chat(turn_id)

    async def _send_direct(self, message: OutboundMessage) -> None:
        """Past the outbox (for the storage-full notice: the outbox is in the full store)."""
        channel = self.channels.get(message.channel)
        if channel is not None:
            await channel.send(message)

    def _principal_for(self, msg: InboundMessage) -> Principal:
        return principal_for(msg, self.settings.channel_sections().get(msg.channel))

    async def _turn_ended(self, chat: ChatRef, turn_id: str, answered: bool) -> None:
        await self.drafts.turn_ended(chat, turn_id, answered=answered)
        channel: object = self.channels.get(chat.channel)  # mypy cannot intersect protocols
        if not isinstance(channel, SupportsTurnEnd):
            return
        try:
            await channel.turn_ended(chat, turn_id, answered=answered)
        except Exception as exc:  # progress display is cosmetic; the turn is committed
            log.debug("turn end display failed on %s: %s", chat.channel, exc)
