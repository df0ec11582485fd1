"""Building a gateway: every part made from Settings, in the order they depend on each other.

One pass, each part given what it uses in its constructor: the store and the guard (one
process per data directory, or a node of a cluster: :mod:`gateway.runtime.deployment`); the
channels; the bus; the inbound stages (:mod:`gateway.runtime.intake.stages`); the models;
the services agents' tools use (jobs, background tasks, the other agents); the agents; what
a chat shows of its turn; approvals; background tasks and the channels other programs use
(webhooks, the API); the turn handlers; the dispatcher and what feeds it; the scheduler and
outbox workers. :class:`gateway.runtime.app.Gateway` runs what this builds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.agent import Agent
from agent.llm.base import LLMProvider
from agent.llm.metered import EndpointSlots
from agent.tools.base import Tool
from agent.tools.web import web_browser
from gateway.config.plugins import token_patterns
from gateway.config.settings import Settings
from gateway.core.addressing import DEFAULT_AGENT
from gateway.core.channel import Channel
from gateway.core.clock import Clock, SystemClock, seconds
from gateway.core.lifecycle import Service
from gateway.core.load import NodeLoad
from gateway.core.logs import Redactor, secret_values
from gateway.core.services import Services
from gateway.runtime.agents.agent_channel import AgentChannel, AgentDirectory, agent_policy
from gateway.runtime.agents.assembly import agent_settings, build_agent
from gateway.runtime.agents.mcp import build_manager
from gateway.runtime.agents.models import ModelPool
from gateway.runtime.agents.recall import build_recall
from gateway.runtime.agents.subagents import Subagents, TaskQueue, TaskWakes
from gateway.runtime.bus import LocalBus
from gateway.runtime.control import OwnerControls
from gateway.runtime.deployment import Guard, LocalGuard, WorkSources
from gateway.runtime.dispatch.commands import Commands
from gateway.runtime.dispatch.controls import Controls
from gateway.runtime.dispatch.dispatcher import Dispatcher
from gateway.runtime.dispatch.status_text import StatusText
from gateway.runtime.intake.access import AccessGate
from gateway.runtime.intake.routing import Router
from gateway.runtime.intake.storage_full import StorageFullWatch
from gateway.runtime.intake.understanding import Understanding, understanding
from gateway.runtime.outbound.drafts import DraftStreamer
from gateway.runtime.outbound.worker import OutboundWorker
from gateway.runtime.parts import DirectSend, configured_channels
from gateway.runtime.people.budget import UserBudget
from gateway.runtime.people.chat_book import ChatBook
from gateway.runtime.people.zones import Zones
from gateway.runtime.programs import ProgramRoutes, program_channels
from gateway.runtime.reload import ConfigReload, live_settings
from gateway.runtime.schedule.heartbeat import Heartbeat
from gateway.runtime.schedule.housekeeping import housekeeping
from gateway.runtime.schedule.jobs import JobBook
from gateway.runtime.schedule.scheduler import Scheduler
from gateway.runtime.storage import store_for
from gateway.runtime.turns.approvals import Approvals
from gateway.runtime.turns.chat import ChatTurns
from gateway.runtime.turns.commit import TurnCommitter
from gateway.runtime.turns.handlers import TurnHandlers
from gateway.runtime.turns.live import LiveDisplay
from gateway.runtime.turns.routes import Routes
from gateway.runtime.turns.scheduled import ScheduledTurns
from gateway.runtime.turns.task_results import TaskResultTurns
from gateway.store import Store

if TYPE_CHECKING:
    from agent.mcp.manager import McpManager
    from agent.recall.indexer import RecallIndexer
    from agent.recall.search import Recaller
    from agent.web.browser import Browser


@dataclass(frozen=True, slots=True)
class Parts:
    """Everything a running gateway is made of, built once."""

    settings: Settings
    clock: Clock
    load: NodeLoad  # this node's sessions and turns, for status
    store: Store
    guard: Guard  # one process, or a node of a cluster
    channels: dict[str, Channel]
    bus: LocalBus
    understanding: Understanding
    gate: AccessGate
    router: Router
    models: ModelPool
    llm: LLMProvider
    zones: Zones
    recaller: Recaller  # past conversations, for memory_search
    indexer: RecallIndexer  # their vectors, made in the background
    mcp: McpManager | None  # MCP servers, shared by every agent and turn
    browser: Browser | None  # one browser for every agent's web_fetch, launched when needed
    agents: dict[str, Agent]
    drafts: DraftStreamer
    display: LiveDisplay
    approvals: Approvals
    budget: UserBudget
    subagents: Subagents
    config_reload: ConfigReload
    dispatcher: Dispatcher
    intake: Service  # what feeds the dispatcher (one process's intake, or a node's work)
    scheduler: Scheduler
    control: OwnerControls  # the control center's actions (gateway/web/view.py)
    workers: tuple[OutboundWorker, ...]


def guard_for(settings: Settings, load: NodeLoad) -> Guard:
    """One process per data directory (SQLite), or a node of a cluster (``storage.url``)."""
    url = settings.storage.database_url()
    if url is None:
        return LocalGuard(settings)
    from gateway.runtime.cluster.node import ClusterGuard  # noqa: PLC0415 - psycopg when used

    return ClusterGuard(settings, url, load=load)


def build(
    settings: Settings,
    *,
    channels: Sequence[Channel] | None = None,
    llm: LLMProvider | None = None,
    extra_tools: Sequence[Tool] = (),
    clock: Clock | None = None,
    serve_programs: bool = True,
) -> Parts:
    """``channels``: those to run (tests, the in-process terminal chat); by default the
    configured platforms, the web chat and the terminal (``switchboard run``).
    ``serve_programs``: webhooks and the API, when configured (``switchboard chat`` running
    a gateway of its own serves neither)."""
    clock = clock or SystemClock()
    sections = settings.channel_sections()
    # -- durable state, and who may use it
    load = NodeLoad()
    store = store_for(settings)
    guard = guard_for(settings, load)
    # -- channels and the bus between them and the turns
    given = configured_channels(settings) if channels is None else channels
    by_name: dict[str, Channel] = {c.name: c for c in given}
    bus = LocalBus(
        store.journal,
        store.outbox,
        storage_full=StorageFullWatch(settings.data_dir, send=DirectSend(by_name)),
        queue_inbound=guard.single_process,  # in a cluster any node may take a message
    )
    if settings.agents:  # messages between agents travel on an internal channel
        agent_channel = AgentChannel(
            agent_conversations=store.agent_conversations,
            audit=store.audit,
            bus=bus,
            max_hops=settings.agent_messages.max_hops,
        )
        by_name[agent_channel.name] = agent_channel
    # voice notes transcribed, documents read: once, for every channel, before the journal
    understood = understanding(settings, bus, store, sections)
    gate = AccessGate(understood, store, sections, on_outbound=bus.outbound_ready)
    router = Router(settings.routes, tuple(settings.agents))
    # -- models: one concurrency cap per endpoint for everything that calls it (all agents,
    # their subagents, summaries, reflection, page condensing); one provider per model, and
    # the cooldowns of failed models (llm.fallbacks), shared by all agents
    models = ModelPool(
        EndpointSlots(settings.limits.max_concurrent_llm_calls),
        cooldown_seconds=settings.llm.fallback_cooldown_seconds,
        clock=seconds(clock),
    )
    main_llm = models.provider(settings.llm, llm)
    # -- the agents, and the services their tools use
    zones = Zones(
        store.kv, store.people, people=settings.people, default=settings.timezone, clock=clock
    )
    jobs = JobBook(settings, jobs=store.jobs, clock=clock, zones=zones)
    tasks = TaskQueue(store.tasks)
    services = Services(
        jobs=jobs,
        tasks=tasks,
        agents=AgentDirectory(agent_policy(settings), store.agent_conversations),
        zones=zones,
        chats=ChatBook(store.kv, store.people, by_name, chat_channels=tuple(sections), clock=clock),
    )
    # past conversations, searched by every agent's memory_search; their vectors made in
    # the background
    recaller, indexer = build_recall(settings.memory, store)
    mcp = build_manager(settings)
    browser = web_browser(settings.tools.web)

    def llm_for(agent_id: str) -> LLMProvider:
        """An agent's model: shared with every agent that names the same model."""
        if llm is not None or agent_id == DEFAULT_AGENT:
            return main_llm
        own = agent_settings(settings, agent_id).llm
        return models.provider(own, setting=f"agents.{agent_id}")

    agents: dict[str, Agent] = {
        agent_id: build_agent(
            settings,
            agent_id=agent_id,
            store=store,
            bus=bus,
            llm=llm_for(agent_id),
            channels=tuple(by_name),
            extra_tools=extra_tools,
            models=models,
            mcp=mcp,
            browser=browser,
            services=services,
            clock=clock,
            recaller=recaller,
        )
        for agent_id in router.agents
    }
    # -- turns: what a chat shows of them, approvals, the handlers, the dispatcher
    drafts = DraftStreamer(
        by_name,
        store.drafts,
        enabled=settings.streams_in,  # on every node of a cluster too
        delay=settings.stream_after,
        known=store.outbox.known,  # a draft whose answer was already sent stays
    )
    display = LiveDisplay(by_name, drafts=drafts)
    # an approval decided wakes the background task waiting for it, else the chat's turn
    # (through the bus: the intake, or a cluster's work, finds the parked turn)
    wakes = TaskWakes(bus.wake_turn)
    approvals = Approvals(
        store,
        sections,
        clock=clock,
        timeout=settings.tools.approval_timeout_seconds,
        redact=Redactor(secret_values(settings), patterns=token_patterns()),
        on_outbound=bus.outbound_ready,
        wake=wakes.wake,
    )
    budget = UserBudget(store.usage, store.audit, settings.limits)
    # -- background tasks, and the channels other programs use (webhooks, the API)
    subagents = Subagents(
        tasks,
        agents=agents,
        store=store,
        bus=bus,
        approvals=approvals,
        wakes=wakes,
        max_concurrent=settings.scheduler.max_subagents,
        timeout=settings.scheduler.subagent_timeout_seconds,
        max_resume_attempts=settings.agent.max_resume_attempts,
        resume=guard.single_process,  # a cluster: a task of a node that went is interrupted
    )
    programs = ProgramRoutes(settings, store.homes)
    if serve_programs:
        for channel in program_channels(
            settings,
            store=store,
            bus=bus,
            routes=programs,
            queue=tasks,
            subagents=subagents,
            budget=budget,
            agents=router.agents,
        ):
            by_name[channel.name] = channel
    # config.toml changes (and SIGHUP) applied while running, where they can be
    config_reload = ConfigReload(settings, apply=live_settings(agents, budget))
    committer = TurnCommitter(store, bus, storage_full=bus.storage_full, committed=indexer.kick)
    commands = Commands(
        agent_name=settings.agent.name,
        store=store,
        status=StatusText(
            settings,
            store=store,
            models=models,
            load=load,
            channels=tuple(by_name),
            clock=clock,
        ),
        approvals=approvals,
        agents=agents,
        settings=settings,
    )
    handlers = TurnHandlers(
        journal=store.journal,
        chat=ChatTurns(
            agent_conversations=store.agent_conversations,
            homes=store.homes,
            journal=store.journal,
            agents=agents,
            routes=Routes(store.agent_conversations, sections, programs.route),
            commands=commands,
            display=display,
            committer=committer,
            approvals=approvals,
            budget=budget,
            max_resume_attempts=settings.agent.max_resume_attempts,
            sections=sections,
            zones=zones,
            spoken=understood.spoken_replies(settings.workspace_dir),
        ),
        scheduled=ScheduledTurns(
            journal=store.journal, agents=agents, committer=committer, budget=budget, zones=zones
        ),
        task_results=TaskResultTurns(journal=store.journal, tasks=store.tasks, committer=committer),
        committer=committer,
    )
    controls = Controls(
        journal=store.journal,
        commands=commands,
        committer=committer,
        sections=sections,
        stop_phrases=settings.agent.stop_phrases,
        programs=programs.principal,
    )
    dispatcher = Dispatcher(
        handlers,
        controls=controls,
        claims=guard.claims(store, router.session_key, approvals.waiting_turns),
        load=load,
        max_active_turns=settings.limits.max_concurrent_turns,
        turn_timeout=settings.agent.turn_timeout_seconds,
    )
    intake = guard.intake(
        dispatcher,
        WorkSources(
            bus=bus,
            store=store,
            approvals=approvals,
            session_of=router.session_key,
            channels=tuple(by_name),
            max_sessions=settings.limits.max_concurrent_turns,
        ),
    )
    # -- work that starts on its own, and delivery
    heartbeat = Heartbeat(
        settings.heartbeat,
        workspace=settings.workspace_dir,
        outbox=store.outbox,
        usage=store.usage,
        homes=store.homes,
        kv=store.kv,
        timezone=settings.timezone,
    )
    scheduler = Scheduler(
        settings,
        jobs=store.jobs,
        book=jobs,
        dispatcher=dispatcher,
        heartbeat=heartbeat,
        housekeep=housekeeping(store, settings),
        clock=clock,
        zones=zones,
    )
    # -- what the owner's control center changes (through the same parts as the chats)
    control = OwnerControls(
        store=store,
        dispatcher=dispatcher,
        controls=controls,
        approvals=approvals,
        jobs=jobs,
        scheduler=scheduler,
        heartbeat=heartbeat,
        workspace=settings.workspace_dir,
        on_outbound=bus.outbound_ready,
    )
    workers = tuple(
        OutboundWorker(
            channel,
            store.outbox,
            bus,
            max_attempts=settings.storage.outbox_max_attempts,
            drafts=drafts,
            fence=guard.send_fence(),  # a cluster node sends only while it leads
        )
        for channel in by_name.values()
    )
    return Parts(
        settings=settings,
        clock=clock,
        load=load,
        store=store,
        guard=guard,
        channels=by_name,
        bus=bus,
        understanding=understood,
        gate=gate,
        router=router,
        models=models,
        llm=main_llm,
        zones=zones,
        recaller=recaller,
        indexer=indexer,
        mcp=mcp,
        browser=browser,
        agents=agents,
        drafts=drafts,
        display=display,
        approvals=approvals,
        budget=budget,
        subagents=subagents,
        config_reload=config_reload,
        dispatcher=dispatcher,
        intake=intake,
        scheduler=scheduler,
        control=control,
        workers=workers,
    )
