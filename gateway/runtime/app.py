"""Gateway: the composition root. Builds every part from Settings, in the order they depend
on each other, and runs them together.

Built in one pass, each part given what it uses in its constructor: the store and the guard
(one process per data directory, or a node of a cluster); the channels; the bus; the models;
the services agents' tools use (jobs, background tasks, the other agents); the agents; what a
chat shows of its turn; approvals; background tasks and the channels other programs use
(webhooks, the API); the turn handlers; the dispatcher and what feeds it (one process's
intake, or a cluster's claims and work); the scheduler and outbox workers.

Start order: lock the data directory (or join the cluster), open the store, take on what a
previous run left open, start outbox workers and the dispatcher, then connect channels (so
nothing is accepted before it can be processed); stop in reverse, with a drain period.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from agent.agent import Agent
from agent.llm.base import LLMProvider
from agent.llm.factory import configuration_problem
from agent.llm.lazy import LazyProvider
from agent.llm.metered import EndpointSlots
from agent.tools.base import Tool
from agent.tools.web import web_browser
from gateway import __version__
from gateway.config.settings import Settings
from gateway.core.addressing import DEFAULT_AGENT
from gateway.core.channel import Channel, ReceivesOnEveryNode
from gateway.core.clock import Clock, SystemClock, seconds
from gateway.core.lifecycle import Service
from gateway.core.load import NodeLoad
from gateway.core.logs import Redactor, secret_values
from gateway.core.scheduling import ScheduledItem
from gateway.core.services import Services
from gateway.runtime import pairing
from gateway.runtime.access import AccessGate
from gateway.runtime.agent_channel import AgentChannel, AgentDirectory, agent_policy
from gateway.runtime.approvals import Approvals
from gateway.runtime.assembly import agent_settings, build_agent, workspaces
from gateway.runtime.budget import UserBudget
from gateway.runtime.chat_book import ChatBook
from gateway.runtime.cluster import ClusterGuard, guard_for
from gateway.runtime.commands import Commands
from gateway.runtime.connect import ProgramRoutes, program_channels
from gateway.runtime.controls import Controls
from gateway.runtime.dispatcher import Claims, Dispatcher, LocalClaims
from gateway.runtime.drafts import DraftStreamer
from gateway.runtime.heartbeat import Heartbeat, heartbeat_target
from gateway.runtime.home import prepare_workspace
from gateway.runtime.intake import Intake
from gateway.runtime.jobs import JobBook
from gateway.runtime.live import LiveDisplay
from gateway.runtime.local_bus import LocalBus
from gateway.runtime.mcp import build_manager
from gateway.runtime.models import ModelPool
from gateway.runtime.outbound import OutboundWorker
from gateway.runtime.parts import DirectSend, configured_channels
from gateway.runtime.reload import ConfigReload, live_settings
from gateway.runtime.routing import Router
from gateway.runtime.scheduler import Scheduler
from gateway.runtime.status_text import StatusText
from gateway.runtime.storage import store_for
from gateway.runtime.storage_full import StorageFullWatch
from gateway.runtime.subagents import Subagents, TaskQueue, TaskWakes
from gateway.runtime.turns.chat import ChatTurns
from gateway.runtime.turns.commit import TurnCommitter
from gateway.runtime.turns.handlers import TurnHandlers
from gateway.runtime.turns.routes import Routes
from gateway.runtime.turns.scheduled import ScheduledTurns
from gateway.runtime.turns.set_aside import SetAside
from gateway.runtime.turns.task_results import TaskResultTurns
from gateway.runtime.understanding import understanding
from gateway.runtime.zones import Zones
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
        channels: Sequence[Channel] | None = None,
        llm: LLMProvider | None = None,
        extra_tools: Sequence[Tool] = (),
        clock: Clock | None = None,
        serve_programs: bool = True,
    ) -> None:
        """``channels``: those to run (tests, the in-process terminal chat); by default the
        configured platforms, the web chat and the terminal (``switchboard run``).
        ``serve_programs``: webhooks and the API, when configured (``switchboard chat``
        running a gateway of its own serves neither)."""
        self.settings = settings
        self.clock = clock or SystemClock()
        sections = settings.channel_sections()
        # -- durable state, and who may use it
        self.load = NodeLoad()  # this node's sessions and turns, for status
        self.store = store_for(settings)
        self.guard = guard_for(settings, self.load)  # one process, or a node of a cluster
        cluster = isinstance(self.guard, ClusterGuard)
        # -- channels and the bus between them and the turns
        given = configured_channels(settings) if channels is None else channels
        self.channels: dict[str, Channel] = {c.name: c for c in given}
        self.bus = LocalBus(
            self.store,
            storage_full=StorageFullWatch(settings.data_dir, send=DirectSend(self.channels)),
            queue_inbound=not cluster,  # in a cluster any node may take a message
        )
        if settings.agents:  # messages between agents travel on an internal channel
            agent_channel = AgentChannel(
                store=self.store, bus=self.bus, max_hops=settings.agent_messages.max_hops
            )
            self.channels[agent_channel.name] = agent_channel
        # voice notes transcribed, documents read: once, for every channel, before the journal
        self.understanding = understanding(settings, self.bus, self.store, sections)
        self.gate = AccessGate(
            self.understanding, self.store, sections, on_outbound=self.bus.outbound_ready
        )
        self.router = Router(settings.routes, tuple(settings.agents))
        # -- models: one concurrency cap per endpoint for everything that calls it (all
        # agents, their subagents, summaries, reflection, page condensing); one provider per
        # model, and the cooldowns of failed models (llm.fallbacks), shared by all agents
        self.models = ModelPool(
            EndpointSlots(settings.limits.max_concurrent_llm_calls),
            cooldown_seconds=settings.llm.fallback_cooldown_seconds,
            clock=seconds(self.clock),
        )
        self.llm = self.models.provider(settings.llm, llm)
        # -- the agents, and the services their tools use
        self.zones = Zones(
            self.store, people=settings.people, default=settings.timezone, clock=self.clock
        )
        self.jobs = JobBook(settings, store=self.store, clock=self.clock, zones=self.zones)
        self.tasks = TaskQueue(self.store)
        services = Services(
            jobs=self.jobs,
            tasks=self.tasks,
            agents=AgentDirectory(agent_policy(settings), self.store),
            zones=self.zones,
            chats=ChatBook(
                self.store, self.channels, chat_channels=tuple(sections), clock=self.clock
            ),
        )
        self.mcp = build_manager(settings)  # MCP servers, shared by every agent and turn
        # One browser for every agent's web_fetch; launched by the first page that needs it.
        self.browser = web_browser(settings.tools.web)
        self.agents: dict[str, Agent] = {
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
                services=services,
                clock=self.clock,
            )
            for agent_id in self.router.agents
        }
        self.agent = self.agents[DEFAULT_AGENT]
        self.tools = self.agent.executor.registry
        # -- turns: what a chat shows of them, approvals, the handlers, the dispatcher
        self.drafts = DraftStreamer(
            self.channels,
            self.store.drafts,
            enabled=settings.streams_in,  # on every node of a cluster too
            delay=settings.stream_after,
            known=self.store.outbox.known,  # a draft whose answer was already sent stays
        )
        self.display = LiveDisplay(self.channels, drafts=self.drafts)
        # an approval decided wakes the background task waiting for it, else the chat's turn
        # (through the bus: the intake, or a cluster's work, finds the parked turn)
        wakes = TaskWakes(self.bus.wake_turn)
        self.approvals = Approvals(
            self.store,
            sections,
            clock=self.clock,
            timeout=settings.tools.approval_timeout_seconds,
            redact=Redactor(secret_values(settings)),
            on_outbound=self.bus.outbound_ready,
            wake=wakes.wake,
        )
        self.budget = UserBudget(self.store.usage, self.store.audit, settings.limits)
        # -- background tasks, and the channels other programs use (webhooks, the API)
        self.subagents = Subagents(
            self.tasks,
            agents=self.agents,
            store=self.store,
            bus=self.bus,
            approvals=self.approvals,
            wakes=wakes,
            max_concurrent=settings.scheduler.max_subagents,
            timeout=settings.scheduler.subagent_timeout_seconds,
            max_resume_attempts=settings.agent.max_resume_attempts,
            resume=not cluster,  # a cluster: a task of a node that went is interrupted
        )
        programs = ProgramRoutes(settings, self.store)
        if serve_programs:
            for channel in program_channels(
                settings,
                store=self.store,
                bus=self.bus,
                routes=programs,
                queue=self.tasks,
                subagents=self.subagents,
                budget=self.budget,
                agents=self.router.agents,
            ):
                self.channels[channel.name] = channel
        # config.toml changes (and SIGHUP) applied while running, where they can be
        self.config_reload = ConfigReload(settings, apply=live_settings(self.agents, self.budget))
        claims = self._claims()
        committer = TurnCommitter(self.store, self.bus, storage_full=self.bus.storage_full)
        commands = self._commands()
        self.dispatcher = Dispatcher(
            self._turn_handlers(commands, committer, programs),
            controls=Controls(
                store=self.store,
                commands=commands,
                committer=committer,
                sections=settings.channel_sections(),
                programs=programs.principal,
                stop_phrases=settings.agent.stop_phrases,
            ),
            claims=claims,
            load=self.load,
            max_active_turns=settings.limits.max_concurrent_turns,
            turn_timeout=settings.agent.turn_timeout_seconds,
        )
        self.intake: Intake | ClusterWork = self._intake(claims)
        # -- work that starts on its own, and delivery
        self.scheduler = Scheduler(
            settings,
            store=self.store,
            jobs=self.jobs,
            dispatcher=self.dispatcher,
            heartbeat=Heartbeat(
                settings.heartbeat,
                workspace=settings.workspace_dir,
                store=self.store,
                timezone=settings.timezone,
            ),
            clock=self.clock,
            zones=self.zones,
        )
        self._workers = [
            OutboundWorker(
                channel,
                self.store.outbox,
                self.bus,
                max_attempts=settings.storage.outbox_max_attempts,
                drafts=self.drafts,
                # a cluster node sends only while it leads (checked as each send is marked)
                fence=self.guard.membership.leads if isinstance(self.guard, ClusterGuard) else None,
            )
            for channel in self.channels.values()
        ]
        self.web: WebServer | None = None  # gateway/web; started with the web chat
        self._receiving: set[str] = set()  # channels started before this node led

    def _llm_for(self, agent_id: str, given: LLMProvider | None) -> LLMProvider:
        """An agent's model: shared with every agent that names the same model."""
        if given is not None or agent_id == DEFAULT_AGENT:
            return self.llm
        own = agent_settings(self.settings, agent_id).llm
        return self.models.provider(own, setting=f"agents.{agent_id}")

    def _commands(self) -> Commands:
        status = StatusText(
            self.settings,
            store=self.store,
            models=self.models,
            load=self.load,
            channels=tuple(self.channels),
            clock=self.clock,
        )
        return Commands(
            agent_name=self.settings.agent.name,
            store=self.store,
            status=status,
            approvals=self.approvals,
            agents=self.agents,
            settings=self.settings,
        )

    def _turn_handlers(
        self, commands: Commands, committer: TurnCommitter, programs: ProgramRoutes
    ) -> TurnHandlers:
        settings = self.settings
        chat = ChatTurns(
            store=self.store,
            agents=self.agents,
            routes=Routes(self.store, settings.channel_sections(), programs.route),
            commands=commands,
            display=self.display,
            committer=committer,
            set_aside=SetAside(
                self.store.journal,
                lambda: heartbeat_target(settings.heartbeat, self.store),
                max_resume_attempts=settings.agent.max_resume_attempts,
            ),
            approvals=self.approvals,
            budget=self.budget,
            sections=settings.channel_sections(),
            zones=self.zones,
            spoken=self.understanding.spoken_replies(settings.workspace_dir),
        )
        scheduled = ScheduledTurns(
            store=self.store,
            agents=self.agents,
            committer=committer,
            budget=self.budget,
            zones=self.zones,
        )
        task_results = TaskResultTurns(store=self.store, committer=committer)
        return TurnHandlers(
            store=self.store,
            chat=chat,
            scheduled=scheduled,
            task_results=task_results,
            committer=committer,
        )

    def _claims(self) -> Claims:
        if not isinstance(self.guard, ClusterGuard):
            return LocalClaims()
        from gateway.runtime.cluster_work import ClusterClaims  # noqa: PLC0415 - psycopg

        return ClusterClaims(
            self.store,
            self.guard.membership,
            session_of=self.router.session_key,
            waiting_turns=self.approvals.waiting_turns,
        )

    def _intake(self, claims: Claims) -> Intake | ClusterWork:
        if not isinstance(self.guard, ClusterGuard):
            return Intake(
                self.bus,
                self.dispatcher,
                store=self.store,
                approvals=self.approvals,
                session_of=self.router.session_key,
            )
        from gateway.runtime.cluster_work import ClusterClaims, ClusterWork  # noqa: PLC0415

        assert isinstance(claims, ClusterClaims)
        return ClusterWork(
            claims,
            self.dispatcher,
            store=self.store,
            membership=self.guard.membership,
            bus=self.bus,
            session_of=self.router.session_key,
            waiting_turns=self.approvals.waiting_turns,
            channels=tuple(self.channels),
            max_sessions=self.settings.limits.max_concurrent_turns,
        )

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        await self.guard.acquire()  # the data directory's lock, or a cluster joined
        try:
            for workspace in workspaces(self.settings).values():
                prepare_workspace(workspace)  # a new agent's workspace starts from the template
            await self.store.start()
            await self.dispatcher.start()
            if isinstance(self.intake, Intake):
                await self.intake.start()  # what the previous run left open, first
            else:  # a node runs turns at once; the rest once it leads (a standby waits here)
                await self.intake.start()
                await self._receive_on_every_node()
                await self.guard.lead()
                await self.approvals.expire_due()
            for worker in self._workers:
                await worker.start()
            if self.mcp is not None:  # before anything can start a turn
                await self.mcp.start()
            await self.subagents.start()
            await self.scheduler.start()
            await self.approvals.start()
            self._check_port()  # a taken port stops us before any channel connects
            for channel in self.channels.values():
                if channel.name not in self._receiving:
                    await channel.start(self.gate)
            for provider in self.models.providers():
                if isinstance(provider, LazyProvider):
                    # import the model SDK now, on a thread, once the channels listen
                    provider.warm()
            await self._serve_web()
            await self.config_reload.start()
        except BaseException:
            await self._shutdown()
            raise
        log.info(
            "Switchboard %s ready (channels: %s)", __version__, ", ".join(self.channels) or "none"
        )
        problem = configuration_problem(self.settings.llm)
        if isinstance(self.llm, LazyProvider) and problem is not None:
            log.warning("%s", problem.explain())  # every turn will say so; say it now too

    def _check_port(self) -> None:
        if self.settings.web.enabled and self.web is None:
            from gateway.web import check_port  # noqa: PLC0415 - aiohttp only when serving

            check_port(self)

    async def _serve_web(self) -> None:
        if self.web is not None:  # started before this node led: now serve it all
            self.web.serve_all()
        elif self.settings.web.enabled:
            from gateway.web import start_web  # noqa: PLC0415 - aiohttp only when serving

            self.web = await start_web(self)

    async def _receive_on_every_node(self) -> None:
        """A cluster node takes WhatsApp's webhooks and the signed hooks before it leads (or
        without ever leading): they are journaled in the shared store and answered by the
        node that runs the session (gateway.core.channel.ReceivesOnEveryNode). Its web
        server serves only those routes until the node leads."""
        every = [c for c in self.channels.values() if isinstance(c, ReceivesOnEveryNode)]
        if not every or not self.settings.web.enabled:
            return
        from gateway.web import check_port, start_web  # noqa: PLC0415 - aiohttp when serving

        check_port(self)
        for channel in every:
            await channel.start(self.gate)
            self._receiving.add(channel.name)
        self.web = await start_web(self, standby=True)

    async def stop(self, *, drain_timeout: float = 10.0, now: asyncio.Event | None = None) -> None:
        """Stop; running turns get ``drain_timeout`` seconds to finish, or less once ``now``
        is set (a second Ctrl-C). A turn cut short resumes at the next start."""
        await self._shutdown(drain_timeout=drain_timeout, now=now)

    async def _shutdown(
        self, *, drain_timeout: float = 10.0, now: asyncio.Event | None = None
    ) -> None:
        await self.config_reload.stop()
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
        await self.intake.stop()  # first: no work is taken on while the turns drain
        await self.dispatcher.stop(drain_timeout=drain_timeout, now=now)
        await self.drafts.stop()
        await self.display.stop()
        for worker in self._workers:
            await worker.stop()
        for agent in self.agents.values():
            await agent.stop()
        if self.mcp is not None:  # after the turns that use the servers
            await self.mcp.stop()
        if self.browser is not None:
            await self.browser.stop()
        for provider in self.models.providers():
            with contextlib.suppress(Exception):
                await provider.aclose()
        await self.understanding.aclose()
        await self.store.stop()
        await self.guard.release()

    # -- what the web server sees (gateway.web.view.GatewayView) ---------------------------

    def work_in_progress(self) -> WorkInProgress:
        return WorkInProgress(self.dispatcher.running_turns, self.dispatcher.queued_messages)

    def schedule(self) -> list[ScheduledItem] | None:
        return self.scheduler.snapshot()

    def model_states(self) -> list[ModelState]:
        return self.models.states()

    def degraded(self) -> str | None:
        if isinstance(self.guard, ClusterGuard) and self.guard.membership.degraded.is_set():
            return "lost the database: paused, reconnecting"
        return None

    async def decide_pairing(self, code: str, *, approve: bool, by: str) -> PairingRequest | None:
        decide = pairing.approve if approve else pairing.deny
        request = await decide(self.store, code, by=by)
        if request is not None:
            self.bus.outbound_ready(request.channel)  # deliver the welcome now
        return request

    async def wait_idle(self, channel: str | None = None) -> None:
        """Return once no message of ``channel`` is waiting, running or unsent.

        Bound it with ``asyncio.timeout`` at the call site when needed.
        """
        await self.bus.settled(channel)
