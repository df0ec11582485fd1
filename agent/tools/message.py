"""The ``message`` tool: say something in the current chat before the turn ends."""

from __future__ import annotations

from typing import Any

from agent.tools.base import Effect, Tool, ToolContext, ToolResult, schema
from gateway.messages import OutboundKind, OutboundMessage


class Message(Tool):
    name = "message"
    description = (
        "Send a message to the user in this chat now (progress, or the answer itself). "
        "Do not repeat it in your final reply."
    )
    parameters = schema({"content": {"type": "string", "minLength": 1}}, ("content",))
    effect = Effect.SEND
    repeatable = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        content: str = args["content"]
        await ctx.send(
            OutboundMessage(
                channel=ctx.chat.channel,
                chat_id=ctx.chat.chat_id,
                thread_id=ctx.chat.thread_id,
                text=content,
                kind=OutboundKind.PROGRESS,
                turn_id=ctx.turn_id,
                idempotency_key=ctx.idempotency_key,
            )
        )
        ctx.state.sent_texts.append(content)
        return ToolResult("sent")
