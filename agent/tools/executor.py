"""Running one tool call: parse, validate, check policy, keep it idempotent, bound it.

Whatever happens, the model gets a tool result (exceptions become error results), so the
history stays valid for the next provider call.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any, Protocol

from agent.llm.types import ToolCall
from agent.tools.base import Tool, ToolContext, ToolError, ToolResult
from agent.tools.registry import ToolRegistry
from gateway.store import ToolLedger

log = logging.getLogger(__name__)


class ToolGate(Protocol):
    """Decides whether a tool may run for this turn; returns a refusal reason or ``None``."""

    def refusal(self, tool: Tool, ctx: ToolContext) -> str | None: ...


@dataclass(frozen=True, slots=True)
class ParsedCall:
    tool: Tool
    args: dict[str, Any]


def truncate(text: str, limit: int) -> str:
    """Keep the head and the tail of an over-long result, with a visible marker."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted} characters omitted ...]\n{text[-tail:]}"


class ToolExecutor:
    def __init__(
        self,
        registry: ToolRegistry,
        ledger: ToolLedger,
        *,
        gate: ToolGate,
        max_concurrent: int = 16,
        max_result_chars: int = 12_000,
    ) -> None:
        self.registry = registry
        self._ledger = ledger
        self._gate = gate
        self._semaphore = asyncio.Semaphore(max_concurrent)
        self._max_result_chars = max_result_chars

    def parse(self, call: ToolCall) -> ParsedCall | ToolResult:
        """The tool and its arguments, or an error result that says what is valid."""
        tool = self.registry.get(call.name)
        if tool is None:
            valid = ", ".join(self.registry.names())
            return ToolResult.error(f"unknown tool {call.name!r}; valid tools: {valid}")
        try:
            args = json.loads(call.arguments or "{}")
        except json.JSONDecodeError as exc:
            return ToolResult.error(f"arguments are not valid JSON ({exc.msg}); send a JSON object")
        if not isinstance(args, dict):
            return ToolResult.error("arguments must be a JSON object")
        errors = self.registry.validation_errors(tool.name, args)
        if errors:
            return ToolResult.error("invalid arguments:\n" + "\n".join(errors))
        return ParsedCall(tool, args)

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        parsed = self.parse(call)
        if isinstance(parsed, ToolResult):
            return parsed
        return await self.run(parsed, ctx)

    async def run(self, parsed: ParsedCall, ctx: ToolContext) -> ToolResult:
        tool = parsed.tool
        refusal = self._gate.refusal(tool, ctx)
        if refusal is not None:
            return ToolResult.error(refusal)
        key = ctx.idempotency_key
        if tool.side_effects:
            previous = await self._ledger.get(key)
            if previous is not None:
                return _replayed(previous.state, previous.result)
            await self._ledger.start(key, tool.name)
        result = await self._invoke(tool, parsed.args, ctx)
        if tool.side_effects:
            await self._ledger.finish(key, json.dumps([result.content, result.is_error]))
        if result.untrusted:
            ctx.state.read_untrusted = True
        return result

    async def _invoke(self, tool: Tool, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            async with self._semaphore:
                result = await tool.run(args, ctx)
        except ToolError as exc:
            return ToolResult.error(str(exc))
        except Exception as exc:
            log.exception("tool %s failed", tool.name)
            return ToolResult.error(f"{tool.name} failed: {type(exc).__name__}: {exc}")
        return ToolResult(
            truncate(result.content, self._max_result_chars), result.is_error, result.untrusted
        )


def _replayed(state: str, stored: str | None) -> ToolResult:
    if state == "done" and stored is not None:
        content, is_error = json.loads(stored)
        return ToolResult(content, is_error=is_error)
    return ToolResult.error(
        "this action was started before an interruption and its outcome is unknown; "
        "it was not repeated. Tell the user and let them decide whether to try again."
    )
