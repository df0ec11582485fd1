"""Refuse or ask: what happens to a side effect the policy refuses but the owner could allow.

The refusals themselves are decided where they always were (:mod:`agent.policy` for roles
and taint, ``approval_refusal`` of ``send_email`` and ``message`` for a recipient a member
typed or a member's cross-chat send); each says whether it is *askable*, who may allow it
(:class:`agent.tools.base.Refusal`), whether the turn's own person may (``confirmable``: the
owner's or an admin's own side effect after outside content), and what approvers must see
verbatim besides the call (after outside content: what the turn read, and the person's
words as a hint). :class:`ApprovalPolicy` decides, in one place, what becomes of it:

- refused whatever anyone decided (a protected file, a recipient found only in outside
  content: ``Tool.refused_anyway``): refused, and nobody is asked;
- not askable, ``tools.approvals = "refuse"`` (unless ``confirmable``: that request goes
  to the person themselves, in their own chat), or a turn no one waits in (heartbeat,
  cron, a message from another agent): refused, as before;
- askable, no decision yet: :class:`AwaitingApproval` is raised out of the tool loop. The
  turn stops before the call (its earlier steps are checkpointed), the runtime stores the
  request, asks the approvers and parks the turn (gateway.runtime.turns.approvals);
- decided: when the turn resumes, the same call finds the decision. Approved, for exactly
  these arguments: it runs (once: the idempotency ledger starts only now). Denied, expired
  or nobody to ask: the model gets a refusal that says so, and tells the user.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any, Literal

from agent.tools.base import Refusal, Tool, ToolContext, ToolResult
from gateway.core.addressing import AGENT_CHANNEL
from gateway.core.messages import Attachment
from gateway.core.principal import Role
from gateway.core.turns import TurnKind
from gateway.store import ApprovalRequest, ApprovalRequests, ApprovalState

Mode = Literal["ask", "refuse"]


def fingerprint(args: dict[str, Any]) -> str:
    """What an approval covers: these arguments exactly."""
    canonical = json.dumps(args, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A call waiting for approval, as the runtime needs it to ask."""

    turn_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any]  # exact; the runtime redacts them before anyone sees them
    reason: str  # the policy's refusal: why it needs approval
    authority: Role  # who may decide: ADMIN (the owner or the admins) or OWNER
    reach: str = ""  # what it could read, write or act on once run (Tool.reach)
    files: tuple[Attachment, ...] = ()  # pictures of it, sent with the request (Tool.reach)

    @property
    def call_key(self) -> str:
        return f"{self.turn_id}:{self.call_id}"


class AwaitingApproval(Exception):
    """The turn must wait for a decision on ``ask`` (raised out of the tool loop)."""

    def __init__(self, ask: PendingCall) -> None:
        super().__init__(f"{ask.tool} waits for approval")
        self.ask = ask


class ApprovalPolicy:
    def __init__(self, mode: Mode = "refuse", book: ApprovalRequests | None = None) -> None:
        self.mode = mode
        self._book = book

    def may_ask(self, ctx: ToolContext, refusal: Refusal | None = None) -> bool:
        """Whether this turn can wait for a person's decision (on ``refusal``: one its own
        person may confirm is asked with either mode): a chat turn of a person, or a
        background task (it waits without a slot and resumes); a heartbeat or scheduled
        turn cannot be resumed, and nobody waits for it."""
        return (
            (self.mode == "ask" or (refusal is not None and refusal.confirmable))
            and self._book is not None
            and ctx.turn_kind in (TurnKind.CHAT, TurnKind.SUBAGENT)
            and ctx.chat.channel != AGENT_CHANNEL
        )

    async def decide(
        self, refusal: Refusal, tool: Tool, args: dict[str, Any], ctx: ToolContext
    ) -> ToolContext | ToolResult:
        """The context to run the call with (approved), or the refusal to return; raises
        :class:`AwaitingApproval` when the approvers must be asked first."""
        if refusal.askable and (anyway := await tool.refused_anyway(args, ctx)) is not None:
            return ToolResult.error(anyway)  # nobody is asked what cannot run
        if not refusal.askable or not self.may_ask(ctx, refusal):
            return ToolResult.error(refusal.reason)
        assert self._book is not None
        record = await self._book.for_call(ctx.idempotency_key)
        if record is None or record.pending:
            shown = await tool.reach(args, ctx)
            raise AwaitingApproval(
                PendingCall(
                    ctx.turn_id,
                    ctx.call_id,
                    tool.name,
                    args,
                    refusal.reason,
                    refusal.authority,
                    reach="\n".join(t for t in (shown.text, refusal.shown) if t),
                    files=shown.files,
                )
            )
        if record.state is ApprovalState.APPROVED and record.fingerprint == fingerprint(args):
            return replace(ctx, approved=True)
        return ToolResult.error(decided_refusal(record, tool.name))


def decided_refusal(record: ApprovalRequest, tool: str) -> str:
    """What the model is told about a call that was not approved."""
    if record.state is ApprovalState.DENIED:
        why = f"approval request {record.id} was denied (by {record.decided_by})"
    elif record.state is ApprovalState.EXPIRED:
        why = f"nobody approved request {record.id} in time, so it was refused"
    elif record.state is ApprovalState.REFUSED:
        why = f"nobody can approve it here ({record.decided_by or 'no approver'})"
    else:  # approved, but for other arguments
        why = f"request {record.id} was approved for different arguments"
    return f"{tool} was not run: {why}. Tell the user; they may ask again."
