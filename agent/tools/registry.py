"""The tool registry: names, compact schemas for the model, and argument validation."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from jsonschema import Draft202012Validator

from agent.llm.types import ToolSpec
from agent.tools.base import Tool
from gateway.core.principal import Principal


class ToolSource(Protocol):
    """Tools known only at run time (an MCP server's, after it started): ``prepare`` puts the
    ones ``principal`` may use into the registry before a turn picks its tools."""

    async def prepare(self, registry: ToolRegistry, principal: Principal) -> None: ...


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, Draft202012Validator] = {}
        self._all_specs: tuple[ToolSpec, ...] | None = None
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} registered twice")
        Draft202012Validator.check_schema(tool.parameters)
        self._tools[tool.name] = tool
        self._validators[tool.name] = Draft202012Validator(tool.parameters)
        self._all_specs = None

    def replace_source(self, source: str, tools: Iterable[Tool]) -> None:
        """Swap every tool of ``source`` for ``tools`` (a server restarted with other tools)."""
        for name in [n for n, t in self._tools.items() if t.source == source]:
            del self._tools[name]
            del self._validators[name]
        self._all_specs = None
        for tool in tools:
            self.register(tool)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def __iter__(self) -> Iterable[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def specs(self, allowed: Callable[[Tool], bool] | None = None) -> tuple[ToolSpec, ...]:
        """Schemas to offer the model (cached when unfiltered)."""
        if allowed is None:
            if self._all_specs is None:
                self._all_specs = tuple(_spec(t) for t in self._tools.values())
            return self._all_specs
        return tuple(_spec(t) for t in self._tools.values() if allowed(t))

    def validation_errors(self, name: str, args: dict[str, Any]) -> list[str]:
        """Schema violations, each phrased for the model; empty when the arguments fit."""
        tool = self._tools[name]
        errors = []
        for error in self._validators[name].iter_errors(args):
            where = ".".join(str(p) for p in error.absolute_path) or "arguments"
            errors.append(f"{where}: {error.message}")
        if errors:
            props = tool.parameters.get("properties", {})
            required = set(tool.parameters.get("required", ()))
            listed = ", ".join(
                f"{key}{'' if key in required else '?'}: {value.get('type', 'any')}"
                for key, value in props.items()
            )
            errors.append(f"valid arguments for {name}: {listed or 'none'}")
        return errors


def _spec(tool: Tool) -> ToolSpec:
    return ToolSpec(tool.name, tool.description, tool.parameters)
