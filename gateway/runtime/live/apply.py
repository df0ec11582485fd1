"""The one path a configuration change takes into the running gateway, whoever made it
(``switchboard config set`` or an editor and the file watcher, SIGHUP, the settings page).

In two steps, so that a change that fails changes nothing. :meth:`LiveApply.prepare` sorts
the changed keys by the part that applies them (:mod:`gateway.config.live`), and builds
what the new settings need, as at start, without touching what runs: the agents (models,
tools, policy), the adapters of changed channels, the MCP servers' new clients. It raises
:class:`~gateway.core.errors.ConfigError` where the gateway would refuse to start. Then
:meth:`LiveApply.commit` puts it in use: the MCP servers that changed are restarted, each
changed channel is restarted alone, the agents are swapped for the next turn, and the
heartbeat, limits, log level and what ``/status`` shows take the new values.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent.agent import Agent
from agent.llm.lazy import LazyProvider
from gateway.config.live import LivePart, changed, live_part
from gateway.config.settings import Settings
from gateway.runtime.agents.mcp import build_manager, limits, server_specs, transports
from gateway.runtime.agents.roster import AgentRoster
from gateway.runtime.dispatch.status_text import StatusText
from gateway.runtime.live.channels import ChannelChange, LiveChannels
from gateway.runtime.people.budget import UserBudget
from gateway.runtime.schedule.heartbeat import OwnersChat
from gateway.runtime.schedule.jobs import JobBook
from gateway.runtime.schedule.scheduler import Scheduler

if TYPE_CHECKING:
    from agent.mcp.client import McpClient
    from agent.mcp.manager import McpManager

log = logging.getLogger(__name__)

# how the MCP servers are reached or bounded: a change restarts every server
_MCP_SHARED = (
    "mcp.sandbox",
    "mcp.start_timeout_seconds",
    "mcp.max_tools_per_server",
    "mcp.max_schema_chars",
)


@dataclass(slots=True)
class McpChange:
    following: McpManager | None  # the manager to use from now on
    replaced: list[McpClient] = field(default_factory=list)  # clients to stop
    restarted: list[str] = field(default_factory=list)  # servers started anew


@dataclass(slots=True)
class Plan:
    """A change, sorted and built (see the module docstring)."""

    settings: Settings
    applied: set[str] = field(default_factory=set)  # keys put in use by commit()
    restart: set[str] = field(default_factory=set)  # keys only a new process applies
    parts: set[LivePart] = field(default_factory=set)
    mcp: McpChange | None = None
    channels: ChannelChange | None = None
    agents: dict[str, Agent] | None = None


class LiveApply:
    def __init__(
        self,
        *,
        roster: AgentRoster,
        channels: LiveChannels,
        scheduler: Scheduler,
        owners_chat: OwnersChat,
        jobs: JobBook,
        budget: UserBudget,
        status: StatusText,
    ) -> None:
        self._roster = roster
        self._channels = channels
        self._scheduler = scheduler
        self._owners_chat = owners_chat
        self._jobs = jobs
        self._budget = budget
        self._status = status

    def prepare(self, old: Settings, new: Settings, *, build: bool = True) -> Plan:
        """Sort the keys that differ between ``old`` and ``new`` and build what the new
        settings need (``build=False``: only sort them, for a preview)."""
        plan = Plan(new)
        by_part: dict[LivePart, set[str]] = defaultdict(set)
        for key in changed(old, new):
            part = live_part(key)
            if part is LivePart.AGENTS and not _same_agent(key, old, new):
                part = None  # an agent added or removed: the routes and directory need a start
            if part is None:
                plan.restart.add(key)
            else:
                by_part[part].add(key)
        if LivePart.CHANNEL in by_part:
            keys = by_part.pop(LivePart.CHANNEL)
            plan.channels = self._channels.prepare(old, new, keys)
            plan.restart |= plan.channels.restart
            if plan.channels.names:
                by_part[LivePart.CHANNEL] = keys - plan.channels.restart
                # the agents learn the channels there are (and send_email's settings)
                by_part.setdefault(LivePart.AGENTS, set())
        if LivePart.MCP in by_part:
            plan.mcp = self._mcp(old, new, by_part[LivePart.MCP]) if build else None
            by_part.setdefault(LivePart.AGENTS, set())  # their toolboxes hold the clients
        plan.parts = set(by_part)
        plan.applied = set().union(*by_part.values())
        if build and LivePart.AGENTS in plan.parts:
            plan.agents = self._roster.build(
                new,
                names=tuple(self._roster.agents),
                channels=self._channel_names(plan.channels),
                mcp=plan.mcp.following if plan.mcp is not None else self._roster.mcp,
            )
        return plan

    async def commit(self, plan: Plan) -> list[str]:
        """Put a prepared change in use; returns what did not work (a channel that did not
        start, ...), the rest stands."""
        new, problems = plan.settings, []
        if plan.mcp is not None:
            await self._commit_mcp(plan.mcp)
        if plan.channels is not None:
            problems += await self._channels.commit(plan.channels)
        if plan.agents is not None:
            self._roster.install(plan.agents)
            self._roster.models.cooldowns.seconds = new.llm.fallback_cooldown_seconds
            self._roster.models.prices.use(new.llm.prices)  # [llm.prices], for every model
            for provider in self._roster.models.providers():
                if isinstance(provider, LazyProvider):
                    provider.warm()  # a new model's SDK, imported on a thread
        if LivePart.SCHEDULE in plan.parts:
            self._jobs.configure(new)
            self._owners_chat.configure(new.heartbeat.target)  # before the heartbeat looks
            await self._scheduler.configure(new)
        if LivePart.ALLOWANCE in plan.parts:
            self._budget.configure(new.limits)
        if LivePart.LOGGING in plan.parts:
            logging.getLogger().setLevel(new.log_level.upper())
        self._status.configure(new)
        return problems

    def _channel_names(self, change: ChannelChange | None) -> list[str]:
        names = dict.fromkeys(self._channels.names())
        if change is not None:
            for name, adapter in change.adapters.items():
                if adapter is None:
                    names.pop(name, None)
                else:
                    names[name] = None
        return list(names)

    def _mcp(self, old: Settings, new: Settings, keys: set[str]) -> McpChange:
        current = self._roster.mcp
        if current is None:
            following = build_manager(new)  # raises ConfigError as at start
            return McpChange(following, restarted=list(following.clients) if following else [])
        specs = server_specs(new)
        if not specs:
            return McpChange(None, replaced=list(current.clients.values()))
        everything = any(key in keys for key in _MCP_SHARED)
        following, replaced = current.successor(
            specs, transports(new), limits=limits(new), restart_all=everything
        )
        fresh = [n for n, c in following.clients.items() if current.clients.get(n) is not c]
        return McpChange(following, replaced, fresh)

    async def _commit_mcp(self, change: McpChange) -> None:
        self._roster.mcp = change.following
        for client in change.replaced:
            await client.stop()  # a call of a running turn on it fails; the next turn's works
        if change.following is not None:
            await change.following.start()  # the eager ones connect now, the others when used
        if change.replaced or change.restarted:
            log.info(
                "MCP servers: %s stopped, %s started anew",
                ", ".join(c.name for c in change.replaced) or "none",
                ", ".join(change.restarted) or "none",
            )


def _same_agent(key: str, old: Settings, new: Settings) -> bool:
    """Whether ``key`` (``agents.<name>.<field>``) is of an agent both settings have."""
    parts = key.split(".")
    if parts[0] != "agents" or len(parts) < 3:
        return True
    return parts[1] in old.agents and parts[1] in new.agents
