"""``[mcp]``: Model Context Protocol servers whose tools the agent may use.

Each ``[mcp.servers.<name>]`` is either a program Switchboard starts and talks to over
stdio (``command``, ``args``, ``env``, ``cwd``) or a server at a ``url`` (streamable HTTP,
or SSE for servers that only speak that). Its tools reach the model as ``<name>__<tool>``.
``env`` and ``headers`` values are secrets: they never print and are redacted from logs,
traces and tool results. The whole table may also be given as JSON in
``SWITCHBOARD_MCP__SERVERS``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from gateway.config.channels import RoleList, StrList
from gateway.core.principal import Role

# Server names become tool-name prefixes: short, and no "__" (the separator).
_SERVER_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


class McpServerSettings(BaseModel):
    """One MCP server: a program (``command``) or an address (``url``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str | None = None  # program to start (stdio), e.g. "uvx" or "/usr/bin/node"
    args: tuple[str, ...] = ()  # its arguments
    env: dict[str, SecretStr] = {}  # its only variables besides PATH, HOME, LANG, ...
    cwd: Path | None = None  # working directory; default: $SWITCHBOARD_HOME/mcp/<name>
    url: str | None = None  # address of a remote server (instead of command)
    headers: dict[str, SecretStr] = {}  # HTTP headers for url, e.g. Authorization
    transport: Literal["http", "sse"] = "http"  # for url: streamable HTTP, or the older SSE
    enabled: bool = True  # false: configured but never started
    tools: StrList | None = None  # allowlist of the server's tool names; unset: all
    timeout_seconds: float = Field(default=30.0, gt=0, le=3_600)  # per tool call
    roles: RoleList = (Role.OWNER, Role.ADMIN)  # who may use its tools: owner, admin, member
    agents: StrList = ("main",)  # agents that get its tools ("*": all)
    eager: bool = False  # start with the gateway instead of on first use
    group_chats: bool = False  # offer its tools in group chats too (not only direct chats)
    sandbox: bool = True  # run the program in the bubblewrap sandbox when [mcp] sandbox allows
    network: bool = True  # inside the sandbox: may use the network (local services included)
    read_paths: tuple[Path, ...] = ()  # inside the sandbox: more paths it may read
    write_paths: tuple[Path, ...] = ()  # inside the sandbox: more paths it may write

    @model_validator(mode="after")
    def _one_target(self) -> McpServerSettings:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a program to start) or url (a server address)")
        if self.url is not None:
            if not re.match(r"^https?://", self.url):
                raise ValueError("url must start with http:// or https://")
            if self.args or self.env or self.cwd is not None:
                raise ValueError("args, env and cwd are for command; a url server takes headers")
        if self.command is not None and self.headers:
            raise ValueError("headers are for url; a command server takes env")
        return self

    @field_validator("roles", mode="before")
    @classmethod
    def _known_roles(cls, value: object) -> object:
        names = value.split(",") if isinstance(value, str) else value
        if isinstance(names, (list, tuple)):
            known = [role.value for role in Role]
            unknown = [n for n in names if str(n).strip() not in known]
            if unknown:
                raise ValueError(f"unknown role(s) {unknown}; use {', '.join(known)}")
        return value

    @property
    def stdio(self) -> bool:
        return self.command is not None

    def for_agent(self, agent: str) -> bool:
        return "*" in self.agents or agent in self.agents


class McpSettings(BaseModel):
    """``[mcp]``: tools from Model Context Protocol servers (see docs/tools.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    servers: dict[str, McpServerSettings] = {}  # by name; each an [mcp.servers.<name>] table
    sandbox: Literal["auto", "bwrap", "off"] = "auto"  # for stdio servers, like tools.exec.sandbox
    start_timeout_seconds: float = Field(default=30.0, gt=0, le=600)  # connect and list tools
    # The prompt stays small: past these, MCP tools are found with find_tools instead.
    max_offered_tools: int = Field(default=20, ge=0, le=500)  # MCP tool schemas in every request
    max_offered_tokens: int = Field(default=1_500, ge=0)  # tokens of MCP tool schemas per request
    max_tools_per_server: int = Field(default=100, ge=1, le=1_000)  # more are left out
    max_schema_chars: int = Field(default=4_000, ge=200)  # a tool with a larger schema is left out

    @field_validator("servers")
    @classmethod
    def _server_names(cls, value: dict[str, McpServerSettings]) -> dict[str, McpServerSettings]:
        for name in value:
            if not _SERVER_NAME.match(name) or "__" in name or name.endswith("_"):
                raise ValueError(
                    f"server name {name!r}: up to 32 lower-case letters, digits, - and _ "
                    "(no '__', no trailing '_': tools are named <server>__<tool>)"
                )
        return value

    def enabled(self) -> dict[str, McpServerSettings]:
        return {name: server for name, server in self.servers.items() if server.enabled}
