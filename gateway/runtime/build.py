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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from agent.agent import Agent
from agent.documents.reader import DocumentReader
from agent.llm.base import LLMProvider
from agent.llm.slots import EndpointSlots
from agent.tools.base import Tool
from agent.tools.browser import browser_sessions
from agent.tools.web import web_browser
from gateway.config.channels import ChannelSection, stream_after, streams_in
from gateway.config.plugins import channel_plugins, token_patterns
from gateway.config.prices import PriceTable
from gateway.config.settings import Settings
from gateway.core.addressing import INTERNAL_CHANNELS, PROGRAM_CHANNELS
from gateway.core.bus import InboundSink
from gateway.core.channel import Channel, StartContext
from gateway.core.clock import Clock, SystemClock, seconds
from gateway.core.lifecycle import Service
from gateway.core.load import NodeLoad
from gateway.core.services import Services
from gateway.core.system.logs import Redactor, secret_values
from gateway.runtime.agents.agent_channel import AgentChannel, AgentDirectory, agent_policy
from gateway.runtime.agents.assembly import workspaces
from gateway.runtime.agents.mcp import build_manager
from gateway.runtime.agents.models import ModelPool
from gateway.runtime.agents.recall import build_recall
from gateway.runtime.agents.roster import AgentRoster
from gateway.runtime.agents.subagents import Subagents, TaskQueue, TaskWakes
from gateway.runtime.bus import LocalBus
from gateway.runtime.control import OwnerControls
from gateway.runtime.deployment import Guard, LocalGuard, WorkSources
from gateway.runtime.dispatch.commands import Commands
from gateway.runtime.dispatch.controls import Controls
from gateway.runtime.dispatch.dispatcher import Dispatcher
from gateway.runtime.dispatch.status_text import StatusText
from gateway.runtime.dispatch.usage_text import UsageText
from gateway.runtime.intake.access import AccessGate
from gateway.runtime.intake.pairing import PairingDesk
from gateway.runtime.intake.revoke import Revocation
from gateway.runtime.intake.routing import Router
from gateway.runtime.intake.stages import chain
from gateway.runtime.intake.storage_full import StorageFullWatch
from gateway.runtime.intake.understanding import Understanding, speech_for, spoken_replies
from gateway.runtime.intake.voice import Allowance, Speech
from gateway.runtime.live.apply import LiveApply
from gateway.runtime.live.channels import LiveChannels
from gateway.runtime.live.settings import LiveAccess
from gateway.runtime.outbound.drafts import DraftStreamer
from gateway.runtime.outbound.records import StoredRecords
from gateway.runtime.outbound.worker import OutboundWorker
from gateway.runtime.parts import DirectSend, configured_channels
from gateway.runtime.people.budget import UserBudget
from gateway.runtime.people.chat_book import ChatBook
from gateway.runtime.people.directory import PeopleDirectory
from gateway.runtime.people.linking import Linking
from gateway.runtime.people.spend import SpendCaps
from gateway.runtime.people.spend_notices import SpendWatch
from gateway.runtime.people.zones import Zones
from gateway.runtime.programs import ProgramRoutes, program_channels
from gateway.runtime.reload import ConfigReload
from gateway.runtime.schedule.agenda import OwnersAgenda
from gateway.runtime.schedule.briefing import Briefing
from gateway.runtime.schedule.heartbeat import Heartbeat, OwnersChat, OwnersHome
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
from gateway.runtime.turns.set_aside import SetAside
from gateway.runtime.turns.task_results import TaskResultTurns
from gateway.store import Store

if TYPE_CHECKING:
    from agent.recall.indexer import RecallIndexer
    from agent.recall.search import Recaller
    from agent.web.browser import Browser
    from agent.web.sessions import BrowserSessions


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
    speech: Speech | None  # the [voice] server: voice notes heard, answers spoken
    inbound: InboundSink  # what channels publish to: the inbound stages, then the journal
    records: StoredRecords  # what channels record besides messages
    router: Router
    models: ModelPool
    llm: LLMProvider
    zones: Zones
    directory: PeopleDirectory  # who an address is: one person on many channels
    linking: Linking  # /link, /unlink, and the owner's links
    recaller: Recaller  # past conversations, for memory_search
    indexer: RecallIndexer  # their vectors, made in the background
    browser: Browser | None  # one browser for every agent's web_fetch, launched when needed
    browser_sessions: BrowserSessions | None  # where the browser tool acts (its own browser)
    roster: AgentRoster  # the agents and the MCP servers they share, built again on a change
    agents: dict[str, Agent]  # the roster's: an agent replaced here takes the next turn
    drafts: DraftStreamer
    display: LiveDisplay
    approvals: Approvals
    budget: UserBudget
    spend_caps: SpendCaps  # the money caps, for the status page
    spend: SpendWatch  # tells the owner how far they are spent
    subagents: Subagents
    config_reload: ConfigReload
    dispatcher: Dispatcher
    intake: Service  # what feeds the dispatcher (one process's intake, or a node's work)
    scheduler: Scheduler
    control: OwnerControls  # the control center's actions (gateway/web/view.py)
    workers: dict[str, OutboundWorker]  # by channel


def owners_agenda(settings: Settings, zones: Zones) -> OwnersAgenda | None:
    """The owner's calendar for scheduled turns, when ``[calendar]`` is configured."""
    if not settings.calendar.enabled:
        return None
    from agent.calendar.caldav import CalDav  # noqa: PLC0415 - iCalendar loads when used

    return OwnersAgenda(CalDav(settings.calendar), zones)


def guard_for(settings: Settings, load: NodeLoad) -> Guard:
    """One process per data directory (SQLite), or a node of a cluster (``storage.url``)."""
    url = settings.storage.database_url()
    if url is None:
        return LocalGuard(settings)
    from gateway.runtime.cluster.node import ClusterGuard  # noqa: PLC0415 - psycopg when used

    return ClusterGuard(settings, url, load=load)


def inbound_stages(
    settings: Settings,
    store: Store,
    bus: LocalBus,
    sections: Mapping[str, ChannelSection],
    speech: Speech | None,
    *,
    directory: PeopleDirectory,
    sees_images: Callable[[], bool],
) -> InboundSink:
    """The inbound stages, in the order a message passes them; then the journal (the bus).
    ``sees_images``: whether the model is shown pictures now (else OCR reads them)."""
    return chain(
        [
            partial(  # who may talk: policies, pairing, group context
                AccessGate,
                sections=sections,
                audit=store.audit,
                outbox=store.outbox,
                pairings=store.pairings,
                people=store.people,
                directory=directory,
                group_context=store.group_context,
                on_outbound=bus.outbound_ready,
            ),
            partial(  # what they sent made readable: voice heard, documents read, replies found
                Understanding,
                sections=sections,
                documents=DocumentReader(settings.tools.documents, sees_images=sees_images),
                journal=store.journal,
                outbox=store.outbox,
                sees_images=sees_images,
                speech=speech,
                allowance=None if speech is None else Allowance(store.voice, speech.settings),
            ),
        ],
        bus,
    )


def people_for(
    settings: Settings,
    store: Store,
    bus: LocalBus,
    sections: Mapping[str, ChannelSection],
    *,
    clock: Clock,
    reload: Callable[[], ConfigReload],
) -> tuple[PeopleDirectory, Linking, Zones, OwnersChat, Revocation]:
    """Who an address is (one person on many channels), the links people make, each
    person's time zone, the owner's chat (where check-ins and notices go), and revoking
    someone's access (config.toml changed through ``reload``, asked for when a revocation
    runs)."""
    directory = PeopleDirectory(
        settings.people, sections, store.links, store.kv, scope=settings.session.scope
    )
    owners_chat = OwnersChat(
        settings.heartbeat.target, OwnersHome(settings, store.homes, directory)
    )
    linking = Linking(
        directory,
        store.links,
        history=store.history,
        recall=store.recall,
        workspaces=workspaces(settings),
        keep=settings.agent.history_max_messages,
        audit=store.audit,
        outbox=store.outbox,
        owner_home=owners_chat.get,
        on_outbound=bus.outbound_ready,
        clock=clock,
    )
    zones = Zones(
        store.kv,
        store.people,
        people=directory.by_address(),
        default=settings.timezone,
        clock=clock,
    )
    revocation = Revocation.of(store, LiveAccess(reload, store.audit))
    return directory, linking, zones, owners_chat, revocation


def allowances(
    settings: Settings,
    store: Store,
    bus: LocalBus,
    directory: PeopleDirectory,
    *,
    owners_chat: OwnersChat,
) -> tuple[SpendCaps, SpendWatch, UserBudget]:
    """The money caps, the watch that tells the owner how far they are spent, and each
    person's allowance (turns, tokens, money)."""
    spend_caps = SpendCaps(
        store.usage,
        settings.limits,
        people=directory.configured(),
        agents=settings.agents,
        timezone=settings.timezone,
    )
    spend = SpendWatch(
        spend_caps,
        store.spend_notices,
        home=owners_chat.get,
        outbound_ready=bus.outbound_ready,
    )
    return (
        spend_caps,
        spend,
        UserBudget(store.usage, store.audit, settings.limits, spend=spend_caps),
    )


def heartbeat_for(
    settings: Settings,
    store: Store,
    *,
    zones: Zones,
    budget: UserBudget,
    owners_chat: OwnersChat,
) -> Heartbeat:
    """The heartbeat, with the day's events when ``calendar.heartbeat`` says so."""
    agenda = owners_agenda(settings, zones)
    return Heartbeat(
        settings.heartbeat,
        workspace=settings.workspace_dir,
        outbox=store.outbox,
        usage=store.usage,
        chat=owners_chat,
        kv=store.kv,
        timezone=settings.timezone,
        agenda=agenda if settings.calendar.heartbeat else None,
        budget=budget,
    )


def scheduler_for(
    settings: Settings,
    store: Store,
    *,
    jobs: JobBook,
    dispatcher: Dispatcher,
    zones: Zones,
    directory: PeopleDirectory,
    heartbeat: Heartbeat,
    owners_chat: OwnersChat,
    clock: Clock,
) -> Scheduler:
    """Jobs, the heartbeat, the morning briefing and housekeeping, on the scheduler."""
    agenda = owners_agenda(settings, zones) if settings.calendar.briefing else None
    return Scheduler(
        settings,
        jobs=store.jobs,
        book=jobs,
        dispatcher=dispatcher,
        heartbeat=heartbeat,
        housekeep=housekeeping(store, settings),
        clock=clock,
        zones=zones,
        directory=directory,
        briefing=(
            Briefing(
                settings.calendar,
                agenda=agenda,
                chat=owners_chat,
                kv=store.kv,
            )
            if agenda is not None
            else None
        ),
    )


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
    speech = speech_for(settings)
    records = StoredRecords(
        store.deliveries,
        store.kv,
        store.outbox,
        store.journal,
        sections,
        on_outbound=bus.outbound_ready,
    )
    # who is revoked leaves config.toml's lists through the reload, built last: it
    # re-configures the scheduler, whose jobs reach the commands that revoke
    directory, linking, zones, owners_chat, revocation = people_for(
        settings, store, bus, sections, clock=clock, reload=lambda: config_reload
    )
    # -- models: one concurrency cap per endpoint for everything that calls it (all agents,
    # their subagents, summaries, reflection, page condensing); one provider per model, and
    # the cooldowns of failed models (llm.fallbacks), shared by all agents
    models = ModelPool(
        EndpointSlots(settings.limits.max_concurrent_llm_calls),
        cooldown_seconds=settings.llm.fallback_cooldown_seconds,
        clock=seconds(clock),
        prices=PriceTable(settings.llm.prices),
    )
    main_llm = models.provider(settings.llm, llm)
    inbound = inbound_stages(
        settings,
        store,
        bus,
        sections,
        speech,
        directory=directory,
        sees_images=models.sees_pictures,
    )
    router = Router(settings.routes, tuple(settings.agents))
    # -- the agents, and the services their tools use
    jobs = JobBook(settings, jobs=store.jobs, clock=clock, zones=zones, directory=directory)
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
    sessions = browser_sessions(settings.tools.browser, settings.tools.web, settings.data_dir)

    roster = AgentRoster(
        store=store,
        bus=bus,
        models=models,
        services=services,
        clock=clock,
        recaller=recaller,
        mcp=mcp,
        browser=browser,
        browser_sessions=sessions,
        extra_tools=extra_tools,
        llm=llm,
    )
    roster.install(
        roster.build(settings, names=router.agents, channels=tuple(by_name), mcp=roster.mcp)
    )
    agents = roster.agents
    # -- turns: what a chat shows of them, approvals, the handlers, the dispatcher
    drafts = DraftStreamer(
        by_name,
        store.drafts,
        enabled=partial(streams_in, sections),  # every node too
        delay=partial(stream_after, sections),
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
        directory=directory,
        control_center=settings.web.enabled,
    )
    # -- what people and background work may spend, and the owner told how far it went
    spend_caps, spend, budget = allowances(settings, store, bus, directory, owners_chat=owners_chat)
    # -- background tasks, and the channels other programs use (webhooks, the API)
    subagents = Subagents(
        tasks,
        agents=agents,
        store=store,
        bus=bus,
        approvals=approvals,
        wakes=wakes,
        budget=budget,
        spend=spend,
        max_concurrent=settings.scheduler.max_subagents,
        timeout=settings.scheduler.subagent_timeout_seconds,
        max_resume_attempts=settings.agent.max_resume_attempts,
        resume=guard.single_process,  # a cluster: a task of a node that went is interrupted
    )
    programs = ProgramRoutes(settings, owners_chat)
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
            chats=tuple(by_name),
        ):
            by_name[channel.name] = channel
    committer = TurnCommitter(
        store, bus, storage_full=bus.storage_full, committed=indexer.kick, spend=spend
    )
    status = StatusText(
        settings,
        store=store,
        models=models,
        load=load,
        channels=tuple(name for name in by_name if name not in INTERNAL_CHANNELS),
        clock=clock,
    )
    commands = Commands(
        agent_name=settings.agent.name,
        linking=linking,
        store=store,
        audit=store.audit,
        usage_report=store.usage,
        pairing=PairingDesk.of(store),
        revocation=revocation,
        status=status,
        usage=UsageText(store.usage, store.people, spend_caps),
        approvals=approvals,
        agents=agents,
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
            set_aside=SetAside(
                store.journal,
                owners_chat.get,
                max_resume_attempts=settings.agent.max_resume_attempts,
            ),
            sections=sections,
            zones=zones,
            people=store.people,
            spoken=spoken_replies(speech, settings.workspace_dir),
            first_turn=linking.first_turn,
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
            people_changed=zones.forget,
            task_stopped=subagents.stopped_elsewhere,
        ),
    )
    # -- work that starts on its own, and delivery
    scheduler = scheduler_for(
        settings,
        store,
        jobs=jobs,
        dispatcher=dispatcher,
        zones=zones,
        directory=directory,
        heartbeat=heartbeat_for(
            settings, store, zones=zones, budget=budget, owners_chat=owners_chat
        ),
        owners_chat=owners_chat,
        clock=clock,
    )
    # -- what the owner's control center changes (through the same parts as the chats)
    control = OwnerControls(
        pairing=PairingDesk.of(store),
        revocation=revocation,
        links=store.links,
        audit=store.audit,
        dispatcher=dispatcher,
        controls=controls,
        approvals=approvals,
        jobs=jobs,
        scheduler=scheduler,
        heartbeat=scheduler.heartbeat,
        workspace=settings.workspace_dir,
        on_outbound=bus.outbound_ready,
        linking=linking,
        journal=store.journal,
        outbox=store.outbox,
        chat_channels=tuple(
            name for name in by_name if name not in PROGRAM_CHANNELS | INTERNAL_CHANNELS
        ),
    )

    def worker(channel: Channel) -> OutboundWorker:
        return OutboundWorker(
            channel,
            store.outbox,
            bus,
            max_attempts=settings.storage.outbox_max_attempts,
            drafts=drafts,
            fence=guard.send_fence(),  # a cluster node sends only while it leads
        )

    workers = {name: worker(channel) for name, channel in by_name.items()}
    # config.toml changes (and SIGHUP, and the settings page) applied while running, where
    # they can be (gateway/config/live.py says which)
    config_reload = ConfigReload(
        settings,
        live=LiveApply(
            roster=roster,
            channels=LiveChannels(
                channels=by_name,
                sections=sections,
                workers=workers,
                worker=worker,
                start=StartContext(inbound, records=records),
                ready=bus.outbound_ready,
                plugins=channel_plugins(),
                # switchboard run built them from the settings, and can again; a cluster
                # node runs channels only while it leads
                managed=channels is None and guard.single_process,
            ),
            scheduler=scheduler,
            owners_chat=owners_chat,
            jobs=jobs,
            budget=budget,
            status=status,
        ),
    )
    return Parts(
        settings=settings,
        clock=clock,
        load=load,
        store=store,
        guard=guard,
        channels=by_name,
        bus=bus,
        speech=speech,
        inbound=inbound,
        records=records,
        router=router,
        models=models,
        llm=main_llm,
        zones=zones,
        directory=directory,
        linking=linking,
        recaller=recaller,
        indexer=indexer,
        browser=browser,
        browser_sessions=sessions,
        roster=roster,
        agents=agents,
        drafts=drafts,
        display=display,
        approvals=approvals,
        budget=budget,
        spend_caps=spend_caps,
        spend=spend,
        subagents=subagents,
        config_reload=config_reload,
        dispatcher=dispatcher,
        intake=intake,
        scheduler=scheduler,
        control=control,
        workers=workers,
    )
