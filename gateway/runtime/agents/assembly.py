"""Building the agent from Settings: tools, policy, model, context, compaction.

A wiring module (like :mod:`gateway.runtime.app`): it knows the agent package, so the rest of the
gateway does not have to.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from agent.agent import Agent, AgentConfig
from agent.approval import ApprovalPolicy
from agent.compaction import Compactor
from agent.context import ContextBuilder
from agent.llm.base import LLMProvider
from agent.llm.metered import Charge, MeteredModel
from agent.llm.slots import EndpointSlots
from agent.llm.types import ChatMessage, SystemPrompt
from agent.memory import GROUPS, PEOPLE
from agent.policy import ToolPolicy
from agent.protected import PROTECTED
from agent.recall.search import Recaller
from agent.skills import GetSkill, SkillLibrary
from agent.skills.proposals import Proposals
from agent.skills.tools import SkillPropose
from agent.tokens import TokenCounter
from agent.tools.agents import SendToAgent
from agent.tools.base import Tool
from agent.tools.chats import Chats
from agent.tools.cron import Cron
from agent.tools.executor import ToolExecutor
from agent.tools.find_tools import FindTools
from agent.tools.memory import MemoryAppend, MemoryPatch, MemoryRead, MemorySearch, MemoryWrite
from agent.tools.pins import Goals, Notes
from agent.tools.registry import ToolRegistry
from agent.tools.spawn import Notify, Spawn
from agent.tools.timezone import TimeZone
from agent.toolset import default_tools
from agent.turn.inputs import TurnLimits
from agent.web.browser import Browser
from agent.web.sessions import BrowserSessions
from agent.workspace import ATTACHMENTS, Workspace
from gateway.config.plugins import token_patterns
from gateway.config.prices import PriceTable
from gateway.config.settings import Settings
from gateway.core.addressing import DEFAULT_AGENT
from gateway.core.clock import Clock, SystemClock
from gateway.core.schedule_spec import zone
from gateway.core.services import Services
from gateway.core.system.logs import Redactor, secret_values
from gateway.core.usage import Purpose
from gateway.runtime.agents.agent_channel import roster
from gateway.runtime.agents.models import ModelPool, endpoint
from gateway.runtime.bus import Bus
from gateway.runtime.turns.accounting import recorder
from gateway.store import Store

if TYPE_CHECKING:
    from agent.mcp.manager import McpManager  # loaded only when MCP servers are configured

SUMMARY_SYSTEM = "You summarize conversations faithfully and compactly."


def agent_settings(settings: Settings, agent_id: str) -> Settings:
    """The settings an agent runs with: the top level, overlaid with its profile."""
    if agent_id == DEFAULT_AGENT:
        return settings
    profile = settings.agents[agent_id]
    overrides = {
        "provider": profile.provider,
        "model": profile.model,
        "base_url": profile.base_url,
        "api_key": profile.api_key,
        "fallbacks": profile.fallbacks,
    }
    llm = settings.llm.model_copy(update={k: v for k, v in overrides.items() if v is not None})
    workspace = (
        (profile.workspace or settings.home / "agents" / agent_id / "workspace")
        .expanduser()
        .resolve()
    )
    tools = (
        settings.tools
        if profile.safe_mode is None
        else settings.tools.model_copy(update={"safe_mode": profile.safe_mode})
    )
    agent = settings.agent.model_copy(update={"name": settings.agent_name(agent_id)})
    return settings.model_copy(
        update={"workspace": workspace, "llm": llm, "tools": tools, "agent": agent}
    )


def _model_setting(top: Settings, agent_id: str) -> str:
    """Where an agent's own model is configured: its profile when that names another model."""
    if agent_id == DEFAULT_AGENT:
        return "llm"
    mine, main = agent_settings(top, agent_id).llm, top.llm
    fields = ("provider", "model", "base_url")
    return (
        "llm" if all(getattr(mine, f) == getattr(main, f) for f in fields) else f"agents.{agent_id}"
    )


def workspaces(settings: Settings) -> dict[str, Path]:
    return {
        agent_id: agent_settings(settings, agent_id).workspace_dir
        for agent_id in (DEFAULT_AGENT, *settings.agents)
    }


def metered_model(
    settings: Settings,
    llm: LLMProvider,
    *,
    store: Store,
    models: ModelPool,
    setting: str = "llm",
    fallbacks_at: str = "llm",
    counter: TokenCounter | None = None,
) -> MeteredModel:
    """An agent's model behind its endpoint's gateway-wide cap (with fallbacks, a chain whose
    models each have their own); calls no turn commits (a reflection, a background summary)
    are recorded in the usage table right away."""
    model = models.model(settings.llm, llm, setting=setting, fallbacks_at=fallbacks_at)
    return MeteredModel(
        model,  # a chain's models each have their own cap
        slots=None if settings.llm.fallbacks else models.slots.for_endpoint(endpoint(settings.llm)),
        context_window=settings.llm.context_window,
        record=recorder(store),
        counter=counter,  # counts the tokens of servers that report none
        max_tokens=settings.llm.max_tokens,
        temperature=settings.llm.temperature,
        prices=models.prices,
        reconciler=models.reconciler,
        fallbacks=[fallback.model for fallback in settings.llm.fallbacks],
    )


def build_policy(settings: Settings, *, deny: Sequence[str] = ()) -> ToolPolicy:
    policy = settings.tools.policy
    return ToolPolicy(
        deny=tuple(deny),
        safe_mode=settings.tools.safe_mode,
        exec_enabled=settings.tools.exec.enabled,
        member_deny=policy.member_deny,
        group_deny=policy.group_deny,
        admin_deny=policy.admin_deny,
        taint_guard=policy.taint_guard,
        ask_approval=settings.tools.approvals == "ask",
    )


def build_workspace(settings: Settings, *, others: Sequence[Path] = ()) -> Workspace:
    """An agent's workspace; Switchboard's state and the other agents' workspaces are off limits."""
    root = settings.workspace_dir
    return Workspace(
        root,
        restricted=(settings.data_dir, settings.config_file, *(o for o in others if o != root)),
        # Files that shape other turns (persona, skills, HEARTBEAT.md, USER.md): only the
        # owner changes them (agent/protected.py), so no turn can raise its own rights.
        protected=PROTECTED,
        # Others' words: files people sent, and the memory other people's and groups'
        # turns write (a person's own is trusted in their own turns: agent/turn/scope.py).
        untrusted=(root / ATTACHMENTS, root / PEOPLE, root / GROUPS),
    )


def build_agent(
    settings: Settings,
    *,
    store: Store,
    bus: Bus,
    llm: LLMProvider,
    channels: Sequence[str],
    extra_tools: Sequence[Tool] = (),
    agent_id: str = DEFAULT_AGENT,
    models: ModelPool | None = None,
    mcp: McpManager | None = None,
    browser: Browser | None = None,
    browser_sessions: BrowserSessions | None = None,
    services: Services | None = None,
    clock: Clock | None = None,
    recaller: Recaller | None = None,
) -> Agent:
    """One agent of the gateway. ``settings`` are the top level; the profile of
    ``agent_id`` (workspace, model, persona, tools) is applied here. ``models`` holds the
    gateway's fallback models, their cooldowns and the concurrency caps per model endpoint
    (shared by all its agents)."""
    top = settings
    settings = agent_settings(top, agent_id)
    wall = clock or SystemClock()
    models = models or ModelPool(
        EndpointSlots(top.limits.max_concurrent_llm_calls),
        cooldown_seconds=top.llm.fallback_cooldown_seconds,
        prices=PriceTable(top.llm.prices),
    )
    profile = top.agents.get(agent_id)
    own_fallbacks = profile is not None and profile.fallbacks is not None
    counter = TokenCounter(cache_dir=settings.data_dir / "tiktoken")
    model = metered_model(
        settings,
        llm,
        store=store,
        models=models,
        setting=_model_setting(top, agent_id),
        fallbacks_at=f"agents.{agent_id}" if own_fallbacks else "llm",
        counter=counter,
    )
    choices = {model.model: model}  # what /model may switch a chat to: the fallbacks too
    for index, fallback in enumerate(settings.llm.fallback_settings()):
        own = settings.model_copy(update={"llm": fallback})
        choices.setdefault(
            fallback.model,
            metered_model(
                own,
                models.provider(fallback, setting=f"llm.fallbacks[{index}]"),
                store=store,
                models=models,
                setting=f"llm.fallbacks[{index}]",
                counter=counter,
            ),
        )
    workspace = build_workspace(settings, others=list(workspaces(top).values()))
    skills = SkillLibrary(
        settings.workspace_dir / "skills",
        configured_secrets=settings.skills.secrets,
        mcp_servers=settings.mcp.servers,
    )
    skills.problems()  # read now: a skill changed since it was approved is logged at start
    policy = build_policy(settings, deny=profile.deny_tools if profile else ())
    budget = top.mcp  # rarely used tools, and MCP servers' past the budget, wait behind it
    agent_tools: list[Tool] = [
        Goals(store.pins),
        Notes(store.pins),
        FindTools(max_tools=budget.max_offered_tools, max_tokens=budget.max_offered_tokens),
    ]
    if top.agents:
        agent_tools.append(SendToAgent())
    toolbox = mcp.toolbox(agent_id) if mcp is not None else None  # its tools join each turn
    tools = ToolRegistry(
        [
            *default_tools(
                settings,
                llm=model,
                audit_log=store.audit,
                browser=browser,
                browser_sessions=browser_sessions,
                skills=skills,
            ),
            MemoryRead(),
            MemoryWrite(store.memory_entries),
            MemoryPatch(store.memory_entries),
            MemoryAppend(store.memory_entries),
            MemorySearch(
                recaller or Recaller(store.recall, None), store.memory_entries, store.people
            ),
            GetSkill(skills),
            SkillPropose(Proposals(skills)),
            Cron(),
            TimeZone(),
            Chats(),
            Spawn(),
            Notify(),
            *agent_tools,
            *extra_tools,
        ]
    )
    window = settings.llm.context_window
    redact = Redactor(secret_values(settings), patterns=token_patterns())
    executor = ToolExecutor(
        tools,
        store.ledger,
        gate=policy,
        max_concurrent=settings.limits.max_concurrent_tools,
        # A tool result never takes more than about an eighth of the window.
        max_result_chars=min(settings.agent.tool_result_max_chars, window // 2),
        redact=redact,
        approvals=ApprovalPolicy(settings.tools.approvals, store.approval_requests),
    )
    turn = settings.agent

    async def summarize(prompt: str, charge: Charge) -> str:
        response = await model.ask(
            SystemPrompt(SUMMARY_SYSTEM),
            [ChatMessage("user", prompt)],
            purpose=Purpose.SUMMARY,
            charge=charge,
        )
        return response.text

    async def audit(kind: str, **detail: object) -> None:
        await store.audit.record(kind, detail=detail)

    gateway_zone = zone(settings.timezone)  # user.timezone changes with a restart
    return Agent(
        model=model,
        executor=executor,
        limits=TurnLimits(
            max_iterations=turn.max_iterations,
            max_turn_tokens=turn.max_turn_tokens,
            review_retries=turn.review_retries,
            llm_review=turn.llm_review,
            verify_claims=turn.verify_claims,
        ),
        policy=policy,
        history=store.history,
        context=ContextBuilder(
            settings.workspace_dir,
            agent_name=turn.name,
            persona=profile.persona if profile else "",
            bootstrap_max_chars=turn.bootstrap_max_chars,
            skills=skills,
            agents=roster(top, agent_id) if top.agents else "",
        ),
        workspace=workspace,
        send=lambda message: bus.publish_outbound([message]),
        clock=wall.now,
        config=AgentConfig(
            turn_timeout=turn.turn_timeout_seconds,
            history_limit=turn.history_max_messages,
            default_reply=turn.default_reply,
            vision=settings.llm.vision,
            reflection=turn.reflection,
            session_reset=turn.session_reset,
            idle_reset_minutes=turn.idle_reset_minutes,
            agent_id=agent_id,
            zone=gateway_zone,
        ),
        compactor=Compactor(
            history=store.history,
            summarize=summarize,
            counter=counter,
            window=model.window,  # one window for both: lowered when the server names its own
            max_messages=turn.history_max_messages,
            quote_share=top.memory.quote_share,
        ),
        channels=channels,
        audit=audit,
        pins=store.pins,
        trace_dir=settings.data_dir / "traces",
        redact=redact,
        tool_source=toolbox,
        services=services,
        storage_alarm=bus.storage_full,
        choices=choices,
        memory_entries=store.memory_entries,
    )
