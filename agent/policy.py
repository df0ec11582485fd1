"""Which tools a turn may use, decided in code from settings, the principal and the turn.

The same rules filter the tools offered to the model and are checked again when a call
arrives, so a model that invents a call to a tool it was not offered is still refused.

Layers, in order:

1. configuration: ``exec`` disabled, safe mode (no exec, no file writes);
2. role and chat type: what members and groups may not use (``[tools.policy]``), and the
   roles and chat types a tool allows itself (an MCP server's ``roles``, ``group_chats``);
3. group context: a turn whose message brought what others said in the group writes no
   memory (:mod:`gateway.runtime.intake.group_context`);
4. taint: once a turn has read outside content (a web page, an email, command output,
   what another person or a group wrote), a call that such content could have asked for
   (``Tool.guarded_action``: every side effect but a reply in this chat, and a fetch of a
   web address the turn has not seen) runs only with an approval: the words of the
   person's message are shown to the approver as a hint, and never authorise it;
5. skills: a turn that loaded a skill uses no tool beyond what the skill declared
   (:mod:`agent.tools.bounds`), whoever asks and whatever they say.

A tool that does another's work under the hood (``Tool.runs_as``: a skill's script is a
command) is refused by layers 1 and 2 wherever that one is.

A refusal says whether the owner could allow the call anyway (``askable``: a tool members or
admins are denied, a side effect in a tainted turn); with ``tools.approvals = "ask"`` such
tools are still offered, and :mod:`agent.approval` asks the approvers when one is called.
A turn nobody could be asked in (a heartbeat, a scheduled job, a message between agents)
is refused, and the model is told to say what it would have done.

Which *file* a write targets is checked where the path is resolved: protected files
(``HEARTBEAT.md``, ``USER.md``, the persona, skills; :mod:`agent.protected`) are refused in
:meth:`agent.workspace.Workspace.resolve` for every turn that may not change them, tainted
ones included, whatever the user's words.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from agent.task_types import TaskType, fits
from agent.tools.base import Effect, Outside, Refusal, Tool, ToolContext, asked_for
from agent.tools.bounds import Bounds
from gateway.config.settings import GROUP_DENY, MEMBER_DENY
from gateway.core.addressing import AGENT_CHANNEL, API_CHANNEL, HOOK_CHANNEL
from gateway.core.messages import ChatType
from gateway.core.principal import Principal, Role
from gateway.core.turns import TurnKind

SHOWN_WORDS = 300  # of the person's message, in the approver's block
SHOWN_DETAIL = 200  # of what the turn read (an address, a path, a command), there too


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    safe_mode: bool = False
    exec_enabled: bool = True
    member_deny: Collection[str] = MEMBER_DENY
    group_deny: Collection[str] = GROUP_DENY
    taint_guard: bool = True
    admin_deny: Collection[str] = field(default_factory=tuple)
    deny: Collection[str] = field(default_factory=tuple)  # this agent never offers these
    ask_approval: bool = False  # tools.approvals = "ask": askable refusals are still offered

    def static_refusal(self, tool: Tool, principal: Principal) -> Refusal | None:
        """Refusals that do not depend on what happened in the turn."""
        refusal = self._refusal_of(tool, tool.name, principal)
        if refusal is None and tool.runs_as:
            refusal = self._refusal_of(tool, tool.runs_as, principal)
        return refusal

    def _refusal_of(self, tool: Tool, name: str, principal: Principal) -> Refusal | None:
        if name in self.deny:
            return Refusal(f"{tool.name} is not available to this agent")
        if tool.effect is Effect.EXEC and not self.exec_enabled:
            return Refusal("exec is disabled in this gateway's configuration")
        if (
            self.safe_mode
            and tool.effect in (Effect.EXEC, Effect.WRITE)
            and tool.name not in _MEMORY_WRITES
            and tool.name != "timezone"  # the person's own setting, no file
        ):
            return Refusal(
                f"{tool.name} is not available in safe mode (no commands, no file writes)"
            )
        if principal.chat_type is not ChatType.DM and (
            name in self.group_deny or not tool.group_chats
        ):
            return Refusal(f"{tool.name} is not available in group chats")
        if tool.roles is not None and principal.role not in tool.roles:
            allowed = " and ".join(f"{role}s" for role in sorted(tool.roles)) or "nobody"
            return Refusal(f"{tool.name} is only available to {allowed}")
        return self.role_refusal(name, principal, shown=tool.name)

    def role_refusal(
        self, name: str, principal: Principal, *, shown: str | None = None
    ) -> Refusal | None:
        """What the owner keeps from members (``member_deny``) and admins (``admin_deny``):
        tool ``name`` (``shown`` in the reason) for ``principal``'s role, or ``None``. The
        task API asks it about ``spawn``: a task is what ``spawn`` starts."""
        shown = shown or name
        if principal.role is Role.MEMBER and name in self.member_deny:
            return Refusal(f"{shown} is only available to the owner and admins", askable=True)
        if principal.role is Role.ADMIN and name in self.admin_deny:
            return Refusal(f"{shown} is not available to admins", True, Role.OWNER)
        return None

    def refusal(self, tool: Tool, args: dict[str, Any], ctx: ToolContext) -> Refusal | None:
        static = self.static_refusal(tool, ctx.principal)
        if static is not None:
            return static
        bounded = ctx.state.bounds.tool_refusal(tool.name)
        if bounded is not None:
            return Refusal(bounded)
        if tool.name in _MEMORY_WRITES and ctx.inbound is not None and ctx.inbound.context:
            return Refusal(
                "this message came with what others said in the group; that is context for "
                "this answer only and is never written to memory"
            )
        return self.taint_refusal(tool, args, ctx)

    def taint_refusal(self, tool: Tool, args: dict[str, Any], ctx: ToolContext) -> Refusal | None:
        """After outside content: a call that content could have asked for waits for an
        approver, who is told what the turn read and what the call does; in a turn nobody
        could be asked in it is refused. Nothing the person wrote lets it through."""
        if not (self.taint_guard and ctx.state.read_untrusted):
            return None
        does = tool.guarded_action(args, ctx)
        if does is None:
            return None
        read = outside_kinds(ctx.state.outside)
        why = (
            f"{tool.name} {does}, and this turn has read outside content ({read}), which could "
            "have asked for exactly that; a message's words never authorise it."
        )
        if unattended(ctx):
            what = "scheduled run" if ctx.turn_kind.scheduled else "turn"
            return Refusal(
                f"{why} It was not done: in a {what} nobody waits in, nobody can approve it. "
                "Say in your answer what you would have done and why, so that the owner can "
                "ask for it."
            )
        own = confirms_own(ctx.principal)
        advice = (
            "Tell the user what you would do; they decide."
            if self.ask_approval or own
            else "Tell the user what you would do: approvals are off here "
            '(tools.approvals = "refuse"), so they can only ask for it again in a new message.'
        )
        return Refusal(
            f"{why} {advice}",
            askable=True,
            # An approval waives this check: who approves must be entitled to everything
            # the turn may do (the owner's own turn is the owner's to allow).
            authority=Role.OWNER if ctx.principal.is_owner else Role.ADMIN,
            shown=_shown(ctx, tool),
            confirmable=own,
        )

    def offered(self, tool: Tool, principal: Principal) -> bool:
        refusal = self.static_refusal(tool, principal)
        return refusal is None or (self.ask_approval and refusal.askable)

    def offer(
        self,
        tools: Iterable[Tool],
        principal: Principal,
        *,
        kind: TurnKind,
        task: TaskType,
        bounds: Bounds,
    ) -> set[str]:
        """The tools a turn shows its model, by name: those ``principal`` may be offered,
        that fit the turn's kind and type (:mod:`agent.task_types`), within the bounds of
        the skills it loaded, and that have something to work with now."""
        return {
            tool.name
            for tool in tools
            if self.offered(tool, principal)
            and fits(tool, kind=kind, task=task)
            and bounds.tool_refusal(tool.name) is None
            and tool.available()
        }


_MEMORY_WRITES = frozenset({"memory_write", "memory_patch", "memory_append"})


def unattended(ctx: ToolContext) -> bool:
    """A turn no person could approve anything in: a heartbeat or a scheduled job (it
    cannot be resumed), a message between agents."""
    return ctx.turn_kind.scheduled or ctx.chat.channel == AGENT_CHANNEL


def confirms_own(principal: Principal) -> bool:
    """Whether a person may approve their own turn's side effects, in their own chat:
    the owner and admins, where such a request goes to them and nobody else (not a
    webhook's turn, which nobody waits in, nor an API token below the owner's, whose
    requests go to the owners of the chat channels)."""
    if principal.channel == HOOK_CHANNEL:
        return False
    if principal.channel == API_CHANNEL:
        return principal.is_owner
    return principal.is_admin


def outside_kinds(outside: Iterable[Outside]) -> str:
    """What outside content a turn read, in our own words: "a web page; command output"."""
    kinds = list(dict.fromkeys(o.kind for o in outside))
    return "; ".join(kinds) if kinds else "outside content"


def _shown(ctx: ToolContext, tool: Tool) -> str:
    """The lines approvers see verbatim beside the call: what the turn read (others chose
    those addresses and names), and the person's own words, as a hint."""
    lines = ["read in this turn:"]
    lines += [
        f"  {o.kind}" + (f": {_cut(o.detail, SHOWN_DETAIL)}" if o.detail else "")
        for o in ctx.state.outside
    ]
    said = " ".join(ctx.user_texts)
    if said.strip():
        cut = _cut(said, SHOWN_WORDS)
        named = not tool.intent or asked_for(ctx.user_texts, tool.intent)
        hint = "" if named else " (it does not name this kind of action)"
        lines.append(f"the message of this turn{hint}: {cut}")
    return "\n".join(lines)


def _cut(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters (an ellipsis says it was cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
