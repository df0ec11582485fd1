"""Running one tool call: validate, check policy, keep it idempotent, bound it.

Whatever happens, the model gets a tool result (exceptions become error results), so the
history stays valid for the next provider call. The one exception is a call that waits for
approval (:class:`agent.approval.AwaitingApproval`): it ends the turn's loop before anything
ran, and the turn resumes at this call once the approvers decided.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol

from agent.approval import ApprovalPolicy
from agent.tools.base import Refusal, Tool, ToolContext, ToolError, ToolResult
from agent.tools.registry import ToolRegistry
from agent.web.seen import addresses_in
from gateway.store import LedgerEntry, ToolLedger

log = logging.getLogger(__name__)
TARGET_CHARS = 300  # of what a call acts on, kept in the ledger


class ToolGate(Protocol):
    """Decides whether a call may run in this turn; returns a refusal or ``None``."""

    def refusal(self, tool: Tool, args: dict[str, Any], ctx: ToolContext) -> Refusal | None: ...


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
        redact: Callable[[str], str] = lambda text: text,
        approvals: ApprovalPolicy | None = None,
    ) -> None:
        self.registry = registry
        self._approvals = approvals or ApprovalPolicy()
        self._redact = redact
        self._ledger = ledger
        self._gate = gate
        self._semaphore = asyncio.Semaphore(max_concurrent)
        self._max_result_chars = max_result_chars

    async def side_effects(self, turn_id: str) -> list[LedgerEntry]:
        """What the turn set out to change, as the idempotency ledger recorded it."""
        return await self._ledger.of_turn(turn_id)

    def check(self, name: str, args: dict[str, Any]) -> Tool | ToolResult:
        """The tool to run, or an error result that says what is valid (nothing runs)."""
        tool = self.registry.get(name)
        if tool is None:
            valid = ", ".join(self.registry.names())
            return ToolResult.error(f"unknown tool {name!r}; valid tools: {valid}")
        errors = self.registry.validation_errors(tool.name, args)
        if errors:
            return ToolResult.error("invalid arguments:\n" + "\n".join(errors))
        return tool

    async def refusal(
        self, tool: Tool, args: dict[str, Any], ctx: ToolContext
    ) -> ToolResult | None:
        """The policy's refusal as an (audited) error result, or ``None`` when allowed."""
        refusal = self._gate.refusal(tool, args, ctx)
        if refusal is None:
            return None
        await ctx.audit("policy", tool=tool.name, reason=refusal.reason, turn=ctx.turn_id)
        return ToolResult.error(refusal.reason)

    async def permit(
        self, tool: Tool, args: dict[str, Any], ctx: ToolContext
    ) -> ToolContext | ToolResult:
        """The context to run a call with, or its refusal (policy refusals are audited).
        Refuse or ask is decided by the approval gate alone; raises
        :class:`agent.approval.AwaitingApproval` when the call must wait for a decision."""
        refusal = self._gate.refusal(tool, args, ctx)
        by_policy = refusal is not None
        if refusal is None:
            if self._approvals.may_ask(ctx):  # else the tool refuses as it runs
                refusal = await tool.approval_refusal(args, ctx)
        elif refusal.askable and self._approvals.may_ask(ctx, refusal):
            # asked together with the tool's own, since one approval waives both
            refusal = refusal.joined(await tool.approval_refusal(args, ctx))
        if refusal is None:
            return ctx
        verdict = await self._approvals.decide(refusal, tool, args, ctx)
        if by_policy and isinstance(verdict, ToolResult):  # what the model was told
            await ctx.audit("policy", tool=tool.name, reason=verdict.content, turn=ctx.turn_id)
        return verdict

    async def run(self, tool: Tool, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Run a checked call: policy (or approval), idempotency ledger, bounded execution."""
        verdict = await self.permit(tool, args, ctx)
        if isinstance(verdict, ToolResult):
            return verdict
        ctx = verdict
        key = ctx.idempotency_key
        if tool.side_effects:
            previous = await self._ledger.get(key)
            if previous is not None:
                return _replayed(previous.state, previous.result)
            await self._ledger.start(key, tool.name, target(tool.targets, args, self._redact))
        result = await self._invoke(tool, args, ctx)
        if tool.side_effects:
            stored = [result.content, result.is_error, result.untrusted]
            await self._ledger.finish(key, json.dumps(stored))
        if result.untrusted:
            ctx.state.read(tool.read_from(args))
            if tool.shows_links:  # what a page links to: the turn may go there
                ctx.state.seen |= addresses_in([result.content])
        ctx.state.files.extend(result.files)
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
        # Our keys and tokens never enter the model's context, whatever a tool read (an
        # `env` dump, a .env file): the provider, history and the chat never see them.
        content = self._redact(truncate(result.content, self._max_result_chars))
        return replace(result, content=content)


def target(names: Sequence[str], args: dict[str, Any], redact: Callable[[str], str]) -> str:
    """What a call acts on, as the arguments ``names`` (its tool's :attr:`Tool.targets`) say:
    their values (a list's items each) on one line, redacted, then cut to
    :data:`TARGET_CHARS`."""
    values: list[str] = []
    for name in names:
        value = args.get(name)
        items = value if isinstance(value, list) else [value]
        values += [" ".join(str(item).split()) for item in items if item is not None]
    text = redact(", ".join(v for v in values if v))
    return text if len(text) <= TARGET_CHARS else text[: TARGET_CHARS - 1] + "…"


def _replayed(state: str, stored: str | None) -> ToolResult:
    if state == "done" and stored is not None:
        content, is_error, *rest = json.loads(stored)
        # Outside content stays outside content when a resumed turn replays it.
        return ToolResult(content, is_error=is_error, untrusted=bool(rest and rest[0]))
    return ToolResult.error(
        "this action was started before an interruption and its outcome is unknown; "
        "it was not repeated. Tell the user and let them decide whether to try again."
    )
