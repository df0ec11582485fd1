"""What the MCP client needs to know about one server, independent of the settings tree.

The runtime builds these from ``[mcp.servers.<name>]`` (gateway/runtime/agents/mcp.py); tests and
the command line can build them directly. Secret values stay :class:`SecretStr` until the
moment they are handed to the server's process or HTTP client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import SecretStr

from gateway.core.principal import Role


@dataclass(frozen=True, slots=True)
class StdioTarget:
    """A program Switchboard starts and talks to over its stdin and stdout."""

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, SecretStr] = field(default_factory=dict)
    cwd: Path = Path()
    sandbox: bool = True  # run it under bubblewrap when a sandbox is available
    network: bool = True  # inside the sandbox
    read_paths: tuple[Path, ...] = ()
    write_paths: tuple[Path, ...] = ()


@dataclass(frozen=True, slots=True)
class HttpTarget:
    """A server at an address: streamable HTTP, or SSE for servers that only speak that."""

    url: str
    headers: Mapping[str, SecretStr] = field(default_factory=dict)
    transport: Literal["http", "sse"] = "http"


@dataclass(frozen=True, slots=True)
class ServerSpec:
    name: str
    target: StdioTarget | HttpTarget
    timeout: float = 30.0  # per tool call
    allowed_tools: frozenset[str] | None = None  # the server's own tool names; None: all
    roles: frozenset[Role] = frozenset({Role.OWNER, Role.ADMIN})
    group_chats: bool = False
    eager: bool = False
    agents: frozenset[str] = frozenset({"main"})  # "*": every agent

    @property
    def transport(self) -> str:
        return "stdio" if isinstance(self.target, StdioTarget) else self.target.transport

    def for_agent(self, agent: str) -> bool:
        return "*" in self.agents or agent in self.agents


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what a server may put into the prompt and how long it may take to start."""

    start_timeout: float = 30.0
    max_tools_per_server: int = 100
    max_schema_chars: int = 4_000
    max_description_chars: int = 1_000
