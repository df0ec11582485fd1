"""All MCP servers of a gateway, and the view each agent has of them.

:class:`McpManager` owns one :class:`McpClient` per enabled server. The runtime starts it
with the gateway (servers marked ``eager`` connect then, the others on first use) and stops
it last, after the turns. Each agent gets an :class:`McpToolbox`, which before a turn puts
the tools of the servers this agent and this person may use into the agent's registry,
starting a server the first time it is needed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from agent.llm.types import ToolSpec
from agent.mcp.client import McpClient, ServerDown, ServerState
from agent.mcp.results import ImageStore
from agent.mcp.spec import Limits, ServerSpec
from agent.mcp.tools import Skipped, build_tools
from agent.mcp.transports import TransportFactory
from agent.tokens import tools_tokens
from agent.tools.registry import ToolRegistry
from gateway.core.lifecycle import Service
from gateway.core.messages import ChatType
from gateway.core.principal import Principal

log = logging.getLogger(__name__)


class McpManager(Service):
    def __init__(
        self,
        specs: Sequence[ServerSpec],
        transport: TransportFactory,
        *,
        limits: Limits | None = None,
        images: ImageStore | None = None,
    ) -> None:
        self.limits = limits or Limits()
        self.images = images
        self.clients = {
            spec.name: McpClient(spec, transport, start_timeout=self.limits.start_timeout)
            for spec in specs
        }

    async def start(self) -> None:
        for client in self.clients.values():
            if client.spec.eager:
                client.start()  # in the background: a slow server does not hold up the gateway

    async def stop(self) -> None:
        await asyncio.gather(*(client.stop() for client in self.clients.values()))

    def successor(
        self,
        specs: Sequence[ServerSpec],
        transport: TransportFactory,
        *,
        limits: Limits,
        restart_all: bool,
    ) -> tuple[McpManager, list[McpClient]]:
        """A manager for ``specs`` (a configuration changed while running) that keeps this
        one's client of every server whose spec is unchanged, connection and all, and has a
        new one (not started) for each other server; and the clients it no longer uses, to
        stop once it is in use. ``restart_all``: how servers are reached or bounded changed
        (the sandbox, the limits), so none is kept."""
        kept = {} if restart_all else dict(self.clients)
        clients = {
            spec.name: (
                kept[spec.name]
                if spec.name in kept and kept[spec.name].spec == spec
                else McpClient(spec, transport, start_timeout=limits.start_timeout)
            )
            for spec in specs
        }
        following = McpManager((), transport, limits=limits, images=self.images)
        following.clients = clients
        used = {id(client) for client in clients.values()}
        return following, [c for c in self.clients.values() if id(c) not in used]

    def toolbox(self, agent: str) -> McpToolbox | None:
        clients = [c for c in self.clients.values() if c.spec.for_agent(agent)]
        return McpToolbox(clients, self.limits, self.images) if clients else None


class McpToolbox:
    """One agent's MCP servers, as a :class:`agent.tools.registry.ToolSource`."""

    def __init__(
        self, clients: Sequence[McpClient], limits: Limits, images: ImageStore | None
    ) -> None:
        self.clients = tuple(clients)
        self._limits = limits
        self._images = images
        self._registered: dict[str, int] = {}  # server -> generation whose tools are registered
        self.skipped: dict[str, list[Skipped]] = {}

    async def prepare(self, registry: ToolRegistry, principal: Principal) -> None:
        """Start the servers ``principal`` may use that are not started yet (all at once),
        then register the tools of every server that has connected: the policy decides per
        tool who may use it, the same way for every turn. A server that is down keeps the
        tools it had; their calls answer with a clear error."""
        wanted = [c for c in self.clients if _usable(c, principal)]
        starting = [c for c in wanted if c.state in (ServerState.IDLE, ServerState.STARTING)]
        if starting:
            await asyncio.gather(*(_started(c) for c in starting))
        for client in self.clients:
            if client.generation and self._registered.get(client.name) != client.generation:
                self._register(registry, client)

    def _register(self, registry: ToolRegistry, client: McpClient) -> None:
        self._registered[client.name] = client.generation  # once per connection, come what may
        try:
            tools, skipped = build_tools(client, self._limits, self._images)
            registry.replace_source(client.name, tools)
        except Exception:  # a server's odd listing must not take the turn down with it
            log.exception("MCP server %s: its tools could not be registered", client.name)
            return
        self.skipped[client.name] = skipped
        if skipped:
            log.info(
                "MCP server %s: %d tool(s) left out: %s",
                client.name,
                len(skipped),
                "; ".join(f"{s.tool} ({s.reason})" for s in skipped[:5]),
            )


def _usable(client: McpClient, principal: Principal) -> bool:
    spec = client.spec
    if principal.role not in spec.roles:
        return False
    return spec.group_chats or principal.chat_type is ChatType.DM


async def _started(client: McpClient) -> None:
    try:
        await client.ready()
    except ServerDown as exc:
        log.warning("MCP server %s is not available: %s", client.name, exc)


@dataclass(frozen=True, slots=True)
class Probe:
    """What connecting to one server showed (``switchboard mcp``, ``doctor``)."""

    spec: ServerSpec
    ok: bool
    error: str = ""
    tools: tuple[str, ...] = ()  # offered names, "<server>__<tool>"
    read_only: tuple[str, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    instructions: str = ""
    tokens: int = 0  # estimated tokens of the offered tools' schemas


async def probe(spec: ServerSpec, transport: TransportFactory, limits: Limits) -> Probe:
    """Connect, list the tools, disconnect."""
    client = McpClient(spec, transport, start_timeout=limits.start_timeout, quiet=True)
    try:
        await client.ready()
    except ServerDown:
        return Probe(spec, ok=False, error=client.error or "could not connect")
    finally:
        await client.stop()
    tools, skipped = build_tools(client, limits)
    return Probe(
        spec,
        ok=True,
        tools=tuple(t.name for t in tools),
        read_only=tuple(t.name for t in tools if not t.side_effects),
        skipped=tuple(skipped),
        instructions=client.instructions,
        tokens=tools_tokens(ToolSpec(t.name, t.description, t.parameters) for t in tools),
    )
