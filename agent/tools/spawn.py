"""``spawn`` starts a background task; ``notify`` lets that task post interim updates.

The background task runs with the spawning user's permissions (and the spawning turn's
taint), its own step limits, and its own session. Its result reaches the chat through the
system channel and is delivered without another model call.
"""

from __future__ import annotations

from typing import Any

from agent.task_types import TASK_TYPES
from agent.tools.base import Effect, Tool, ToolContext, ToolError, ToolResult, schema
from gateway.core.messages import OutboundKind, OutboundMessage
from gateway.core.turns import task_type_name


class Spawn(Tool):
    name = "spawn"
    description = (
        "Start a background task (long research, multi-step work); its result comes to this "
        "chat when done. task_type explore: read-only; plan: no side effects."
    )
    parameters = schema(
        {
            "task": {"type": "string", "minLength": 5},
            "task_type": {"type": "string", "enum": list(TASK_TYPES)},
        },
        ("task",),
    )
    effect = Effect.SCHEDULE
    intent = ("background", "spawn", "meanwhile")  # a hint for the approver (agent.policy)
    does = "starts a background task"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        tasks = ctx.services.tasks
        if tasks is None:
            raise ToolError("background tasks are not available in this gateway")
        task_id = await tasks.spawn(
            prompt=args["task"],
            task_type=task_type_name(args.get("task_type", "general")),
            chat=ctx.chat,
            principal=ctx.principal,
            user_texts=ctx.user_texts,
            tainted=ctx.state.read_untrusted,
            agent=ctx.agent,
            after_turn=ctx.turn_id,
        )
        return ToolResult(
            f"started background task {task_id}; its result will be sent to this chat. "
            "Tell the user it has started."
        )


class Notify(Tool):
    name = "notify"
    description = "Post a short progress update to the user who started this background task."
    parameters = schema({"content": {"type": "string", "minLength": 1}}, ("content",))
    effect = Effect.SEND
    repeatable = True

    def guarded_action(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        return None  # to the chat the task reports to, as its answer will be

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        await ctx.send(
            OutboundMessage(
                channel=ctx.chat.channel,
                chat_id=ctx.chat.chat_id,
                thread_id=ctx.chat.thread_id,
                text=args["content"],
                kind=OutboundKind.PROGRESS,
                turn_id=ctx.turn_id,
                idempotency_key=ctx.idempotency_key,
            )
        )
        return ToolResult("sent")
