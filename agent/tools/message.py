"""The ``message`` tool: say something now, in this chat or (for admins) another one.

The channel policy guard lives here, in code: a reply goes to the chat the turn came from;
sending to another chat or channel needs an admin, is never done from a group, never by a
heartbeat (it acts with the owner's rights and sees the owner's memory, so it reports to
the owner's chat only), and is refused (and audited) otherwise. After outside content a
send to another chat waits for approval whoever asks (:meth:`Message.guarded_action`,
agent.policy). The first send to a chat the person has never sent to is confirmed with them
first (:meth:`Message._first_send`). A member's send is a refusal the owner could waive:
with ``tools.approvals = "ask"`` it waits for approval (agent.approval).
"""

from __future__ import annotations

from typing import Any

from agent.tools.base import (
    Effect,
    Refusal,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    schema,
)
from gateway.core.messages import ChatRef, ChatType, OutboundKind, OutboundMessage
from gateway.core.turns import TurnKind

# a hint for the approver only (agent.policy): "tell me what this says" asks for no send
SEND_INTENT = ("send", "post", "message", "forward", "share", "notify", "announce")


class Message(Tool):
    name = "message"
    description = (
        "Send a message now (progress, or the answer itself: then do not repeat it), to this "
        "chat unless channel/chat_id name another (admins only)."
    )
    parameters = schema(
        {
            "content": {"type": "string", "minLength": 1},
            "channel": {"type": "string"},
            "chat_id": {"type": "string"},
        },
        ("content",),
    )
    effect = Effect.SEND
    targets = ("channel", "chat_id")
    repeatable = True
    intent = SEND_INTENT

    def guarded_action(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        """A reply in this chat is what the turn does anyway; another chat is a send."""
        if _here(args, ctx):
            return None
        return "sends a message to another chat than this conversation"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        content: str = args["content"]
        channel = args.get("channel") or ctx.chat.channel
        chat_id = args.get("chat_id") or ctx.chat.chat_id
        here = _here(args, ctx)
        refusal = None if here else self._cross_chat_refusal(channel, ctx)
        if refusal is not None and not (refusal.askable and ctx.approved):
            await ctx.audit(
                "channel-policy",
                tool=self.name,
                target=f"{channel}:{chat_id}",
                reason=refusal.reason,
                turn=ctx.turn_id,
            )
            raise ToolError(refusal.reason)
        target = ChatRef(channel, chat_id)
        if not here and (question := await self._first_send(target, ctx)) is not None:
            return question
        await ctx.send(
            OutboundMessage(
                channel=channel,
                chat_id=chat_id,
                thread_id=ctx.chat.thread_id if here else None,
                text=content,
                kind=OutboundKind.PROGRESS,
                turn_id=ctx.turn_id,
                idempotency_key=ctx.idempotency_key,
            )
        )
        if here:
            ctx.state.sent_texts.append(content)
            return ToolResult("sent")
        if ctx.services.chats is not None:
            await ctx.services.chats.sent_to(ctx.principal.person, target)
        await ctx.audit(
            "cross-chat-send", tool=self.name, target=f"{channel}:{chat_id}", turn=ctx.turn_id
        )
        return ToolResult(f"sent to {channel}:{chat_id}")

    @staticmethod
    async def _first_send(target: ChatRef, ctx: ToolContext) -> ToolResult | None:
        """The question to ask when the person never had the bot send to ``target``: only
        the same send in a later turn of theirs (their yes) goes out. An approver's decision
        is a confirmation already; a turn nobody waits for cannot ask, so it is refused."""
        book = ctx.services.chats
        person = ctx.principal.person
        if book is None or ctx.approved or await book.has_sent_to(person, target):
            return None
        where = f"{target.channel}:{target.chat_id}"
        if ctx.unattended:
            raise ToolError(
                f"nothing was ever sent to {where} for this person: a first send there is "
                "confirmed with them in a chat first; tell them what you would send"
            )
        if await book.confirmed_send(person, target, ctx.turn_id):
            return None
        await book.propose_send(person, target, ctx.turn_id)
        return ToolResult(
            f"not sent yet: {where} is a chat this person has never sent to. Ask them to "
            "confirm (name the chat and what you will post there); if they say yes, call "
            "message again with the same channel, chat_id and content."
        )

    async def approval_refusal(self, args: dict[str, Any], ctx: ToolContext) -> Refusal | None:
        if _here(args, ctx):
            return None
        refusal = self._cross_chat_refusal(args.get("channel") or ctx.chat.channel, ctx)
        return refusal if refusal is not None and refusal.askable else None

    @staticmethod
    def _cross_chat_refusal(channel: str, ctx: ToolContext) -> Refusal | None:
        if channel not in ctx.channels:
            configured = ", ".join(ctx.channels) or "none"
            return Refusal(
                f"channel {channel!r} is not configured on this gateway (configured: {configured})"
            )
        if ctx.turn_kind is TurnKind.HEARTBEAT:
            return Refusal(
                "a heartbeat check-in reports only to the owner's own chat; it cannot send to "
                "other chats. Tell the owner what you would send and where."
            )
        if ctx.principal.chat_type is not ChatType.DM:
            return Refusal("sending to another chat is not allowed from a group conversation")
        if not ctx.principal.is_admin:
            return Refusal(
                "sending to another chat or channel needs an admin; reply in this chat instead",
                askable=True,
            )
        return None


def _here(args: dict[str, Any], ctx: ToolContext) -> bool:
    """Whether a call's target is the chat the turn answers in."""
    channel = args.get("channel") or ctx.chat.channel
    chat_id = args.get("chat_id") or ctx.chat.chat_id
    return channel == ctx.chat.channel and chat_id == ctx.chat.chat_id
