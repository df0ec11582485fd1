"""MCP tools as Switchboard tools: ``<server>__<tool>``, through the same executor as ours.

Each tool a server lists becomes a :class:`McpTool` subclass with the server's name and
schema, so argument validation, the policy (the server's ``roles`` and ``group_chats``),
the idempotency ledger, the trace and the timeout apply exactly as for built-in tools. A
tool is a side effect (``Effect.REMOTE``: recorded in the ledger, guarded by the taint
guard, left out of read-only task types) unless the server marks it read-only. What it
returns is outside content. A read-only tool's arguments still reach the server (and a
fetching server, the address they name): after outside content, one whose arguments hold
a web address the turn has not seen waits for approval, as ``web_fetch`` does.

Left out, with the reason (``switchboard doctor`` and ``mcp list`` show them): tools not on
the server's allowlist, schemas that are invalid, not an object, or larger than
``max_schema_chars``, and tools past ``max_tools_per_server``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, ClassVar

import mcp_types as types
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from agent.mcp.client import CallRefused, CallTimedOut, McpClient, ServerDown
from agent.mcp.results import ImageStore, convert
from agent.mcp.spec import Limits, ServerSpec
from agent.tools.base import Effect, Outside, Tool, ToolContext, ToolResult
from agent.tools.names import SEPARATOR
from agent.untrusted import wrap_untrusted
from agent.web.seen import first_unseen

MAX_NAME = 64  # what OpenAI and Anthropic accept for a tool name
_INVALID = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True)
class Skipped:
    """A tool of the server that is not offered, and why."""

    tool: str
    reason: str


class McpTool(Tool):
    """Calls one tool of one server. Subclasses are made by :func:`build_tools`."""

    remote_name: ClassVar[str]
    name = "mcp"
    description = "A tool of an MCP server."
    parameters: ClassVar[dict[str, Any]] = {"type": "object"}
    time_sensitive = True  # another system: its answer may change on its own, so repeats run
    does = "acts on another system through an MCP server"

    def __init__(self, client: McpClient, images: ImageStore | None) -> None:
        self._client = client
        self._images = images

    def guarded_action(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        if self.effect is not Effect.READ:
            return self.does
        if first_unseen(_strings(args), ctx.state.seen) is None:
            return None
        return (
            "sends the MCP server a web address the turn has not seen (it could carry what "
            "the turn read to that site)"
        )

    def read_from(self, args: dict[str, Any]) -> Outside:
        return Outside("an MCP tool's answer", self.name)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            result = await self._client.call(self.remote_name, args)
        except (ServerDown, CallTimedOut) as exc:
            return ToolResult.error(f"{self.name} is unavailable: {exc}")
        except CallRefused as exc:
            text = wrap_untrusted(f"error from {self.name}", str(exc))
            return ToolResult(text, is_error=True, untrusted=True)
        return await asyncio.to_thread(convert, result, source=self.name, images=self._images)


def _strings(value: object) -> list[str]:
    """Every string inside an argument value (nested lists and objects too)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


def build_tools(
    client: McpClient, limits: Limits, images: ImageStore | None = None
) -> tuple[list[Tool], list[Skipped]]:
    """The server's listed tools as tools for the registry, and the ones left out."""
    spec = client.spec
    tools: list[Tool] = []
    skipped: list[Skipped] = []
    names: set[str] = set()
    for remote in client.tools:
        if spec.allowed_tools is not None and remote.name not in spec.allowed_tools:
            skipped.append(Skipped(remote.name, "not on the server's tools allowlist"))
            continue
        problem = schema_problem(remote.input_schema, limits.max_schema_chars)
        if problem is None and len(tools) >= limits.max_tools_per_server:
            problem = f"more than max_tools_per_server ({limits.max_tools_per_server}) tools"
        name = tool_name(spec.name, remote.name)
        if problem is None and name in names:
            problem = f"its name collides with another tool's ({name})"
        if problem is not None:
            skipped.append(Skipped(remote.name, problem))
            continue
        names.add(name)
        tools.append(_tool_class(spec, remote, name, limits)(client, images))
    return tools, skipped


def tool_name(server: str, tool: str) -> str:
    """``<server>__<tool>``, in the characters and length every provider accepts."""
    name = f"{server}{SEPARATOR}{_INVALID.sub('_', tool)}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(tool.encode()).hexdigest()[:6]
    return f"{name[: MAX_NAME - 7]}_{digest}"


def schema_problem(schema: dict[str, Any], max_chars: int) -> str | None:
    if schema.get("type") != "object":
        return "its input schema is not an object"
    size = len(json.dumps(schema))
    if size > max_chars:
        return f"its input schema has {size} characters (max_schema_chars is {max_chars})"
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return f"its input schema is invalid: {exc.message}"
    return None


def _tool_class(spec: ServerSpec, remote: types.Tool, name: str, limits: Limits) -> type[McpTool]:
    read_only = bool(remote.annotations and remote.annotations.read_only_hint)
    description = (remote.description or remote.title or remote.name).strip()
    if len(description) > limits.max_description_chars:
        description = description[: limits.max_description_chars - 1] + "…"
    # "addEvent", "add_event" -> "add event"; its first word is most often the action.
    words = re.sub(r"([a-z])([A-Z])|[_\-. ]+", r"\1 \2", remote.name).strip().lower()
    words = " ".join(words.split())
    attributes: dict[str, Any] = {
        "name": name,
        "remote_name": remote.name,
        "description": f"{description} (from {spec.name})",
        "parameters": remote.input_schema,
        "effect": Effect.READ if read_only else Effect.REMOTE,
        # In a turn that read outside content, the user's own words must name this action.
        "intent": () if read_only else _intent(name, remote.name, words),
        "roles": spec.roles,
        "group_chats": spec.group_chats,
        "source": spec.name,
    }
    return type(f"Mcp_{name}", (McpTool,), attributes)


def _intent(name: str, remote: str, words: str) -> tuple[str, ...]:
    return tuple(
        dict.fromkeys((name, remote, words, words.split(maxsplit=1)[0] if words else remote))
    )
