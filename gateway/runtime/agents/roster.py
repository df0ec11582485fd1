"""The gateway's agents, built from the settings at start and built again when the settings
that shape them change while it runs.

:attr:`AgentRoster.agents` is the one dict every part that runs turns reads (the turn
handlers, background tasks, commands): an agent replaced there takes the next turn, and a
turn already running ends with the agent it started with (its model, tools and limits).
The agents a change replaced are stopped with the gateway, once their turns are over.
The roster also holds the MCP servers' manager, whose toolboxes the agents are built with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from agent.agent import Agent
from agent.llm.base import LLMProvider
from agent.recall.search import Recaller
from agent.tools.base import Tool
from gateway.config.settings import Settings
from gateway.core.addressing import DEFAULT_AGENT
from gateway.core.clock import Clock
from gateway.core.services import Services
from gateway.runtime.agents.assembly import agent_settings, build_agent
from gateway.runtime.agents.models import ModelPool
from gateway.runtime.bus import Bus
from gateway.store import Store

if TYPE_CHECKING:
    from agent.mcp.manager import McpManager
    from agent.web.browser import Browser
    from agent.web.sessions import BrowserSessions


class AgentRoster:
    def __init__(
        self,
        *,
        store: Store,
        bus: Bus,
        models: ModelPool,
        services: Services,
        clock: Clock,
        recaller: Recaller,
        mcp: McpManager | None,
        browser: Browser | None,
        browser_sessions: BrowserSessions | None,
        extra_tools: Sequence[Tool] = (),
        llm: LLMProvider | None = None,
    ) -> None:
        """``llm``: one provider every agent uses whatever the settings name (tests,
        benchmarks); otherwise each agent's model comes from the settings."""
        self._store = store
        self._bus = bus
        self.models = models
        self._services = services
        self._clock = clock
        self._recaller = recaller
        self.mcp = mcp  # the MCP servers' manager now in use (None: no server configured)
        self.browser = browser
        self.browser_sessions = browser_sessions  # where the browser tool acts
        self._extra_tools = tuple(extra_tools)
        self._llm = llm
        self.agents: dict[str, Agent] = {}
        self._retired: list[Agent] = []

    def build(
        self,
        settings: Settings,
        *,
        names: Sequence[str],
        channels: Sequence[str],
        mcp: McpManager | None,
    ) -> dict[str, Agent]:
        """The agents ``names`` as ``settings`` describe them, with the tools of ``mcp``'s
        servers, not in use yet (raises :class:`~gateway.core.errors.ConfigError` for what
        cannot be built, as at start). The model pool counts the models in use afresh; a
        build that fails leaves the count as it was."""
        restore = self.models.recount()
        try:
            main = self.models.provider(settings.llm, self._llm)
            return {name: self._agent(settings, name, main, channels, mcp) for name in names}
        except BaseException:
            restore()
            raise

    def install(self, agents: dict[str, Agent]) -> None:
        """Use ``agents`` from the next turn on."""
        for name, agent in agents.items():
            previous = self.agents.get(name)
            if previous is not None and previous is not agent:
                self._retired.append(previous)
            self.agents[name] = agent

    async def stop(self) -> None:
        """Stop every agent's background work (summaries, reflection), after the turns."""
        for agent in [*self._retired, *self.agents.values()]:
            await agent.stop()
        self._retired.clear()

    def _agent(
        self,
        settings: Settings,
        agent_id: str,
        main: LLMProvider,
        channels: Sequence[str],
        mcp: McpManager | None,
    ) -> Agent:
        if self._llm is not None or agent_id == DEFAULT_AGENT:
            llm = main
        else:  # shared with every agent that names the same model
            own = agent_settings(settings, agent_id).llm
            llm = self.models.provider(own, setting=f"agents.{agent_id}")
        return build_agent(
            settings,
            agent_id=agent_id,
            store=self._store,
            bus=self._bus,
            llm=llm,
            channels=tuple(channels),
            extra_tools=self._extra_tools,
            models=self.models,
            mcp=mcp,
            browser=self.browser,
            browser_sessions=self.browser_sessions,
            services=self._services,
            clock=self._clock,
            recaller=self._recaller,
        )
