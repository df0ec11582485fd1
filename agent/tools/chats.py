"""The ``chats`` tool: the configured channels and the chats the bot is in, by name.

So "post this in #general on Slack" resolves to Slack's channel id, which the ``message``
tool needs. Chat names are the owner's business: owner and admins only (the same people who
may send to another chat at all). A chat's name is whatever whoever runs that chat (or the
person, for a direct chat) typed, so a listing that holds names is outside content: marked
so, and it taints the turn.
"""

from __future__ import annotations

from typing import Any

from agent.tools.base import Outside, Tool, ToolContext, ToolError, ToolResult, schema
from agent.untrusted import wrap_untrusted
from gateway.core.principal import Role

MAX_LISTED = 100


class Chats(Tool):
    name = "chats"
    description = (
        "List the configured channels and the chats the bot is in (Slack channels, Discord "
        "server channels, Telegram groups) with their ids, to send somewhere with message. "
        "Optional channel and query (part of a name, e.g. 'general')."
    )
    parameters = schema({"channel": {"type": "string"}, "query": {"type": "string"}})
    roles = frozenset({Role.OWNER, Role.ADMIN})
    time_sensitive = True  # the bot joins and leaves chats
    rarely_used = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        book = ctx.services.chats
        if book is None:
            raise ToolError("the list of chats is not available in this gateway")
        channel = args.get("channel") or None
        if channel is not None and channel not in ctx.channels:
            configured = ", ".join(ctx.channels) or "none"
            raise ToolError(f"channel {channel!r} is not configured (configured: {configured})")
        query = str(args.get("query") or "").strip().lstrip("#").lower()
        known, notes = await book.known_chats(channel)
        if query:
            known = [c for c in known if query in c.name.lower() or query == c.chat_id.lower()]
        lines = [f"configured channels: {', '.join(ctx.channels) or 'none'}"]
        here = ctx.chat
        lines.extend(
            f"{c.channel} chat_id={c.chat_id} {c.name} ({c.kind})"
            + (" <- this chat" if (c.channel, c.chat_id) == (here.channel, here.chat_id) else "")
            for c in known[:MAX_LISTED]
        )
        if len(known) > MAX_LISTED:
            lines.append(f"... and {len(known) - MAX_LISTED} more: narrow with query")
        if not known:
            lines.append("no chats found" + (f" matching {query!r}" if query else ""))
        lines.extend(notes)
        if not known:
            return ToolResult("\n".join(lines))
        return ToolResult(wrap_untrusted("chat names", "\n".join(lines)), untrusted=True)

    def read_from(self, args: dict[str, Any]) -> Outside:
        return Outside("chat names, set by whoever runs those chats")
