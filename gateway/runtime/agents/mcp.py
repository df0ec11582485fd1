"""Wiring the MCP client from ``[mcp]``: server specs, the sandbox, the manager.

Used by the gateway (one manager shared by every agent and turn), ``switchboard mcp`` and
``switchboard doctor``. The MCP SDK (most of a second of imports) is loaded only when a
server is configured.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from agent.mcp.spec import HttpTarget, Limits, ServerSpec, StdioTarget
from agent.tools.sandbox import Bwrap, SandboxUnavailable, find_bwrap
from gateway.config.mcp import McpServerSettings
from gateway.config.ports import gateway_ports
from gateway.config.settings import Settings
from gateway.core.errors import ConfigError
from gateway.core.system.portguard import PortGuard

if TYPE_CHECKING:
    from agent.mcp.manager import McpManager
    from agent.mcp.transports import Transports


def server_spec(settings: Settings, name: str, server: McpServerSettings) -> ServerSpec:
    target: StdioTarget | HttpTarget
    if server.command is not None:
        target = StdioTarget(
            command=server.command,
            args=server.args,
            env=server.env,
            cwd=_path(server.cwd, settings) if server.cwd else settings.home / "mcp" / name,
            sandbox=server.sandbox,
            network=server.network,
            read_paths=tuple(_path(p, settings) for p in server.read_paths),
            write_paths=tuple(_path(p, settings) for p in server.write_paths),
        )
    else:
        assert server.url is not None  # the settings ensure one of the two
        target = HttpTarget(server.url, server.headers, server.transport)
    return ServerSpec(
        name=name,
        target=target,
        timeout=server.timeout_seconds,
        allowed_tools=None if server.tools is None else frozenset(server.tools),
        roles=frozenset(server.roles),
        group_chats=server.group_chats,
        eager=server.eager,
        agents=frozenset(server.agents),
    )


def server_specs(settings: Settings) -> list[ServerSpec]:
    """The enabled servers."""
    return [server_spec(settings, n, s) for n, s in settings.mcp.enabled().items()]


def limits(settings: Settings) -> Limits:
    mcp = settings.mcp
    return Limits(
        start_timeout=mcp.start_timeout_seconds,
        max_tools_per_server=mcp.max_tools_per_server,
        max_schema_chars=mcp.max_schema_chars,
    )


def transports(settings: Settings) -> Transports:
    """How to reach the servers. Raises :class:`ConfigError` when ``[mcp] sandbox = "bwrap"``
    and a stdio server would need bubblewrap that cannot work here."""
    from agent.mcp.transports import Transports  # noqa: PLC0415 - see the module docstring

    return Transports(
        log_dir=settings.data_dir / "logs" / "mcp",
        sandbox=_sandbox(settings),
        # The sandbox never shows Switchboard's home (config.toml, data/) to a server,
        # even when a configured path contains it.
        protected=(settings.data_dir, settings.config_file),
    )


def build_manager(settings: Settings) -> McpManager | None:
    specs = server_specs(settings)
    if not specs:
        return None
    from agent.mcp.manager import McpManager  # noqa: PLC0415 - see the module docstring
    from agent.mcp.results import ImageStore  # noqa: PLC0415

    return McpManager(
        specs,
        transports(settings),
        limits=limits(settings),
        images=ImageStore(settings.data_dir / "mcp" / "images"),
    )


def _sandbox(settings: Settings) -> Bwrap | None:
    wanted = any(s.stdio and s.sandbox for s in settings.mcp.enabled().values())
    if not wanted:
        return None
    try:
        guard = PortGuard(lambda: gateway_ports(settings))
        return find_bwrap(settings.mcp.sandbox, guard=guard)
    except SandboxUnavailable as exc:
        raise ConfigError(
            f"mcp.sandbox is 'bwrap' but {exc}; install it, or set "
            "SWITCHBOARD_MCP__SANDBOX=auto to run MCP servers without it",
            field="mcp.sandbox",
        ) from None


def _path(path: Path, settings: Settings) -> Path:
    path = path.expanduser()
    return path if path.is_absolute() else (settings.home / path).resolve()
