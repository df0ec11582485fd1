"""``send_to_agent``: ask another agent on this gateway something.

The message is delivered to the other agent's own session with a "from agent X" header;
its answer comes back to this agent, which then answers the person. The access policy
(``may_message`` in config) decides who may message whom; a conversation between agents
is bounded in hops.
"""

from __future__ import annotations

from typing import Any

from agent.tools.base import Effect, Tool, ToolContext, ToolError, ToolResult, schema
from gateway.core.addressing import AGENT_CHANNEL, agent_chat
from gateway.core.messages import OutboundKind, OutboundMessage


class SendToAgent(Tool):
    name = "send_to_agent"
    description = "Send a message to another agent on this gateway; its answer comes back to you."
    parameters = schema(
        {
            "agent": {"type": "string", "minLength": 1},
            "content": {"type": "string", "minLength": 1},
        },
        ("agent", "content"),
    )
    effect = Effect.SEND
    intent = ("ask", "tell", "agent", "send", "message", "check with", "forward")

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        directory = ctx.services.agents
        if directory is None:
            raise ToolError("there are no other agents on this gateway")
        target = args["agent"]
        if not directory.may_message(ctx.agent, target):
            reachable = ", ".join(directory.reachable(ctx.agent)) or "none"
            await ctx.audit("agent-policy", sender=ctx.agent, target=target, turn=ctx.turn_id)
            raise ToolError(
                f"you may not message agent {target!r}; agents you may message: {reachable}"
            )
        if ctx.chat.channel == AGENT_CHANNEL and ctx.chat.thread_id:
            conversation = ctx.chat.thread_id  # already inside an agent conversation
            if ctx.state.read_untrusted:
                await directory.taint(conversation)
        else:
            conversation = await directory.open_conversation(
                sender=ctx.agent,
                origin=ctx.chat,
                principal=ctx.principal,
                user_texts=ctx.user_texts,
                tainted=ctx.state.read_untrusted,
            )
        await ctx.send(
            OutboundMessage(
                channel=AGENT_CHANNEL,
                chat_id=agent_chat(ctx.agent, target),
                thread_id=conversation,
                text=args["content"],
                kind=OutboundKind.PROGRESS,
                turn_id=ctx.turn_id,
                idempotency_key=ctx.idempotency_key,
            )
        )
        return ToolResult(
            f"sent to agent {target}. Its answer will come back to you and you will pass it on; "
            "tell the user you have asked."
        )
