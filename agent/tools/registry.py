"""The tool registry: names, compact schemas for the model, and argument validation.

Validators are built when a tool is first called: jsonschema is not needed before the first
tool call, so it stays out of the start-up path (tests/test_tools.py checks every built-in
schema).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from agent.llm.types import ToolSpec
from agent.tools.base import Tool

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
from gateway.core.principal import Principal


class ToolSource(Protocol):
    """Tools known only at run time (an MCP server's, after it started): ``prepare`` puts the
    ones ``principal`` may use into the registry before a turn picks its tools."""

    async def prepare(self, registry: ToolRegistry, principal: Principal) -> None: ...


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._specs: dict[str, ToolSpec] = {}
        self._validators: dict[str, Draft202012Validator] = {}
        self._all_specs: tuple[ToolSpec, ...] | None = None
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} registered twice")
        self._tools[tool.name] = tool
        self._specs[tool.name] = _spec(tool)
        self._validators.pop(tool.name, None)
        self._all_specs = None

    def replace_source(self, source: str, tools: Iterable[Tool]) -> None:
        """Swap every tool of ``source`` for ``tools`` (a server restarted with other tools)."""
        for name in [n for n, t in self._tools.items() if t.source == source]:
            del self._tools[name]
            self._specs.pop(name, None)
            self._validators.pop(name, None)
        self._all_specs = None
        for tool in tools:
            self.register(tool)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def specs(self, names: Collection[str] | None = None) -> tuple[ToolSpec, ...]:
        """Schemas to offer the model (each built once, at registration): of the tools
        ``names`` holds, or of all; in the order they were registered."""
        if names is None:
            if self._all_specs is None:
                self._all_specs = tuple(self._specs.values())
            return self._all_specs
        return tuple(spec for name, spec in self._specs.items() if name in names)

    def validator(self, name: str) -> Draft202012Validator:
        """The tool's argument validator; raises ``jsonschema.SchemaError`` for a tool whose
        own schema is invalid (a bug in the tool, found by the schema test)."""
        validator = self._validators.get(name)
        if validator is None:
            from jsonschema import Draft202012Validator  # noqa: PLC0415 - see module doc

            parameters = self._tools[name].parameters
            Draft202012Validator.check_schema(parameters)
            validator = self._validators[name] = Draft202012Validator(parameters)
        return validator

    def validation_errors(self, name: str, args: dict[str, Any]) -> list[str]:
        """Schema violations, each phrased for the model; empty when the arguments fit."""
        tool = self._tools[name]
        errors = []
        for error in self.validator(name).iter_errors(args):
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


# Keywords that only constrain values: the validator enforces them (from the full schema)
# and names a violation to the model, so sending them on every call buys nothing.
_VALIDATION_ONLY = frozenset({"additionalProperties", "minLength", "maxLength", "minimum"})


def _spec(tool: Tool) -> ToolSpec:
    return ToolSpec(tool.name, tool.description, model_schema(tool.parameters))


def model_schema(schema: Any) -> Any:
    """``schema`` as the model is shown it: without the keywords only the validator needs
    (:data:`_VALIDATION_ONLY`) and without an empty ``required``. The tool's own schema
    stays whole for validation. Every token here is paid on every model call of every turn."""
    if isinstance(schema, list):
        return [model_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    shown: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _VALIDATION_ONLY and not isinstance(value, dict):
            continue
        if key == "required" and not value:
            continue
        if key == "properties" and isinstance(value, dict):
            shown[key] = {name: model_schema(prop) for name, prop in value.items()}
        else:
            shown[key] = model_schema(value)
    return shown
