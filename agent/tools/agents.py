"""``send_to_agent``: ask another agent on this gateway something.

The message is delivered to the other agent's own session with a "from agent X" header;
its answer comes back to this agent, which then answers the person. The access policy
(``may_message`` in config) decides who may message whom; a conversation between agents
is bounded in hops.

A message sent after outside content carries the taint: every turn of the exchange is
tainted, and an agent's turn has nobody to ask, so the other agent can act on nothing the
content asked for (agent.policy); nor does its message count as words of the person. So
the message itself needs no approval.
"""

from __future__ import annotations

from typing import Any

from agent.tools.base import Effect, Tool, ToolContext, ToolError, ToolResult, schema
from gateway.core.addressing import AGENT_CHANNEL, agent_chat
from gateway.core.messages import OutboundKind, OutboundMessage


class SendToAgent(Tool):
    name = "send_to_agent"
    description = (
        "Send a message to another agent on this gateway (`agent`), or the same message to "
        "several (`agents`); each answer comes back to you."
    )
    parameters = schema(
        {
            "agent": {"type": "string", "minLength": 1},
            "agents": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "minItems": 1,
                "maxItems": 10,
                "uniqueItems": True,
            },
            "content": {"type": "string", "minLength": 1},
        },
        ("content",),
    )
    effect = Effect.SEND
    targets = ("agent", "agents")
    intent = ("agent", "check with")  # a hint for the approver (agent.policy)

    def guarded_action(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        return None  # the exchange is tainted with it (see the module's docstring)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        directory = ctx.services.agents
        if directory is None:
            raise ToolError("there are no other agents on this gateway")
        if bool(args.get("agent")) == bool(args.get("agents")):
            raise ToolError("give exactly one of agent (one name) or agents (a list of names)")
        targets: list[str] = list(args.get("agents") or [args["agent"]])
        refused = [t for t in targets if not directory.may_message(ctx.agent, t)]
        if refused:  # nothing is sent unless every target is allowed
            reachable = ", ".join(directory.reachable(ctx.agent)) or "none"
            for target in refused:
                await ctx.audit("agent-policy", sender=ctx.agent, target=target, turn=ctx.turn_id)
            names = ", ".join(repr(t) for t in refused)
            raise ToolError(
                f"you may not message agent {names}; agents you may message: {reachable}. "
                "Nothing was sent."
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
        for target in targets:
            key = ctx.idempotency_key if len(targets) == 1 else f"{ctx.idempotency_key}:{target}"
            await ctx.send(
                OutboundMessage(
                    channel=AGENT_CHANNEL,
                    chat_id=agent_chat(ctx.agent, target),
                    thread_id=conversation,
                    text=args["content"],
                    kind=OutboundKind.PROGRESS,
                    turn_id=ctx.turn_id,
                    idempotency_key=key,
                )
            )
        sent = ", ".join(targets)
        answers = "Its answer" if len(targets) == 1 else "Each answer"
        return ToolResult(
            f"sent to agent {sent}. {answers} will come back to you and you will pass it on; "
            "tell the user you have asked."
        )
