"""Building the agent from Settings: tools, policy, runner, context, compaction.

A wiring module (like :mod:`gateway.app`): it knows the agent package, so the rest of the
gateway does not have to.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime

from agent.compaction import Compactor
from agent.context import ContextBuilder
from agent.llm.base import LLMProvider
from agent.llm.types import ChatMessage, SystemPrompt
from agent.loop import AgentConfig, AgentLoop
from agent.policy import ToolPolicy
from agent.runner import GuardSettings, Runner
from agent.skills import GetSkill, SkillLibrary
from agent.tokens import TokenCounter
from agent.tools.base import Tool
from agent.tools.cron import Cron
from agent.tools.executor import ToolExecutor
from agent.tools.memory import MemoryAppend, MemoryPatch, MemoryRead, MemorySearch, MemoryWrite
from agent.tools.registry import ToolRegistry
from agent.tools.spawn import Notify, Spawn
from agent.toolset import default_tools
from agent.workspace import Workspace
from gateway.bus import Bus
from gateway.logs import Redactor, secret_values
from gateway.schedule_spec import zone
from gateway.settings import Settings
from gateway.store import Store

SUMMARY_SYSTEM = "You summarize conversations faithfully and compactly."


def build_policy(settings: Settings) -> ToolPolicy:
    policy = settings.tools.policy
    return ToolPolicy(
        safe_mode=settings.tools.safe_mode,
        exec_enabled=settings.tools.exec.enabled,
        member_deny=policy.member_deny,
        group_deny=policy.group_deny,
        admin_deny=policy.admin_deny,
        taint_guard=policy.taint_guard,
    )


def build_workspace(settings: Settings) -> Workspace:
    root = settings.workspace_dir
    return Workspace(
        root,
        restricted=(settings.data_dir, settings.config_file),
        read_only=(root / "skills",),
    )


def build_agent(
    settings: Settings,
    *,
    store: Store,
    bus: Bus,
    llm: LLMProvider,
    channels: Sequence[str],
    extra_tools: Sequence[Tool] = (),
) -> AgentLoop:
    workspace = build_workspace(settings)
    skills = SkillLibrary(settings.workspace_dir / "skills")
    policy = build_policy(settings)
    tools = ToolRegistry(
        [
            *default_tools(settings, llm=llm),
            MemoryRead(),
            MemoryWrite(),
            MemoryPatch(),
            MemoryAppend(),
            MemorySearch(store.history),
            GetSkill(skills),
            Cron(),
            Spawn(),
            Notify(),
            *extra_tools,
        ]
    )
    window = settings.llm.context_window
    executor = ToolExecutor(
        tools,
        store.ledger,
        gate=policy,
        max_concurrent=settings.limits.max_concurrent_tools,
        # A tool result never takes more than about an eighth of the window.
        max_result_chars=min(settings.agent.tool_result_max_chars, window // 2),
    )
    agent_settings = settings.agent
    runner = Runner(
        llm,
        executor,
        llm_semaphore=asyncio.Semaphore(settings.limits.max_concurrent_llm_calls),
        guards=GuardSettings(
            max_iterations=agent_settings.max_iterations,
            max_turn_tokens=agent_settings.max_turn_tokens,
            review_retries=agent_settings.review_retries,
            llm_review=agent_settings.llm_review,
        ),
        max_tokens=settings.llm.max_tokens,
        temperature=settings.llm.temperature,
    )
    counter = TokenCounter(cache_dir=settings.data_dir / "tiktoken")

    async def summarize(prompt: str) -> str:
        response = await runner.call_model(
            SystemPrompt(SUMMARY_SYSTEM), [ChatMessage("user", prompt)], ()
        )
        return response.text

    async def audit(kind: str, **detail: object) -> None:
        await store.audit.record(kind, detail=detail)

    return AgentLoop(
        runner=runner,
        policy=policy,
        history=store.history,
        context=ContextBuilder(
            settings.workspace_dir,
            agent_name=agent_settings.name,
            bootstrap_max_chars=agent_settings.bootstrap_max_chars,
            skills=skills,
        ),
        workspace=workspace,
        send=lambda message: bus.publish_outbound([message]),
        clock=lambda: datetime.now(zone(settings.heartbeat.timezone)),
        config=AgentConfig(
            turn_timeout=agent_settings.turn_timeout_seconds,
            history_limit=agent_settings.history_max_messages,
            default_reply=agent_settings.default_reply,
            vision=settings.llm.vision,
            reflection=agent_settings.reflection,
            session_reset=agent_settings.session_reset,
            idle_reset_minutes=agent_settings.idle_reset_minutes,
        ),
        compactor=Compactor(
            history=store.history,
            summarize=summarize,
            counter=counter,
            window=window,
            max_messages=agent_settings.history_max_messages,
        ),
        counter=counter,
        channels=channels,
        audit=audit,
        trace_dir=settings.data_dir / "traces",
        redact=Redactor(secret_values(settings)),
    )
