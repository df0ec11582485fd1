"""Goals and notes (AI Legion's pinned messages) as two compact tools.

Open goals and note titles are pinned into every turn's context from this state, so the
agent keeps track of ongoing work without it being stored as conversation history. They
belong to the agent and to the scope of the person (or group) it is talking with.

Pinned text is shown in every later turn of the scope, so after outside content a change
waits for approval (agent.policy), as a memory write does; a group's own pins too are
read only by the group's turns, tainted from their start, and are free.
"""

from __future__ import annotations

from typing import Any

from agent.memory import scope_for
from agent.tools.base import (
    Effect,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    schema,
)
from gateway.store import Pins

GOAL_INTENT = ("goal", "aim", "track", "plan", "todo", "to-do", "remember", "keep in mind")
NOTE_INTENT = ("note", "write down", "save", "remember", "keep", "record", "jot")


def pin_scope(ctx: ToolContext) -> str:
    return scope_for(ctx.principal, ctx.chat).directory or "owner"


class _Pins(Tool):
    """A pinned-state tool: guarded after outside content, but not in a group's own scope."""

    def guarded_action(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        if scope_for(ctx.principal, ctx.chat).kind == "group":
            return None
        return super().guarded_action(args, ctx)


class Goals(_Pins):
    name = "goals"
    rarely_used = True
    description = "Goals: add (text), complete (id), list. Open goals stay pinned in your context."
    parameters = schema(
        {
            "action": {"type": "string", "enum": ["add", "complete", "list"]},
            "text": {"type": "string"},
            "id": {"type": "integer"},
        },
        ("action",),
    )
    effect = Effect.WRITE
    targets = ("id",)
    repeatable = True
    read_actions = frozenset({"list"})
    intent = GOAL_INTENT
    does = "changes the goals pinned into every later turn"

    def __init__(self, pins: Pins) -> None:
        self._pins = pins

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        scope = pin_scope(ctx)
        action = args["action"]
        if action == "add":
            if not args.get("text"):
                raise ToolError("add needs text")
            goal_id = await self._pins.add_goal(ctx.agent, scope, args["text"])
            return ToolResult(f"goal {goal_id} added")
        if action == "complete":
            if args.get("id") is None:
                raise ToolError("complete needs the goal id")
            if await self._pins.complete_goal(ctx.agent, scope, int(args["id"])):
                return ToolResult(f"goal {args['id']} completed")
            raise ToolError(f"no open goal {args['id']}")
        goals = await self._pins.goals(ctx.agent, scope, include_done=True)
        if not goals:
            return ToolResult("no goals")
        return ToolResult(
            "\n".join(f"[{g.id}] {'done' if g.done else 'open'}: {g.text}" for g in goals)
        )


class Notes(_Pins):
    name = "notes"
    rarely_used = True
    description = "Named notes: write (title, content), view, delete (title), list."
    parameters = schema(
        {
            "action": {"type": "string", "enum": ["write", "view", "delete", "list"]},
            "title": {"type": "string", "maxLength": 100},
            "content": {"type": "string"},
        },
        ("action",),
    )
    effect = Effect.WRITE
    targets = ("title",)
    repeatable = True
    read_actions = frozenset({"list", "view"})
    intent = NOTE_INTENT
    does = "changes the notes pinned into every later turn"

    def __init__(self, pins: Pins) -> None:
        self._pins = pins

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        scope = pin_scope(ctx)
        action = args["action"]
        if action == "list":
            titles = await self._pins.note_titles(ctx.agent, scope)
            return ToolResult(", ".join(titles) if titles else "no notes")
        title = (args.get("title") or "").strip()
        if not title:
            raise ToolError(f"{action} needs a title")
        if action == "write":
            await self._pins.write_note(ctx.agent, scope, title, args.get("content", ""))
            return ToolResult(f"note {title!r} saved")
        if action == "delete":
            if await self._pins.delete_note(ctx.agent, scope, title):
                return ToolResult(f"note {title!r} deleted")
            raise ToolError(f"no note {title!r}")
        content = await self._pins.note(ctx.agent, scope, title)
        if content is None:
            raise ToolError(f"no note {title!r}")
        return ToolResult(content)
