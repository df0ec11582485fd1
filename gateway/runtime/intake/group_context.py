"""Group context: what was said in a group since the bot was last addressed there.

In a group where the bot answers only when addressed, the other messages of allowed senders
used to be dropped, so "@bot what do you think of that?" reached the model alone. Now the
access gate hands such a message here (:meth:`GroupContextBook.keep`): it is stored durably
before the platform is acknowledged, and never starts a turn. The next message that
addresses the bot in that group (thread) takes the newest of them along
(:meth:`GroupContextBook.attach`: at most ``<channel>.group_context_messages`` and
:data:`MAX_TOKENS`), labelled with who said what; once that message is journaled they are
forgotten, so each is shown once. The agent shows them as context from others, the turn
counts as having read outside content (no reflection into memory, side effects need the
person's own words), and nothing of it is written to anyone's memory.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from agent.tokens import estimate
from gateway.config.channels import ChannelSection
from gateway.core.messages import InboundMessage, Said
from gateway.store import GroupContext

log = logging.getLogger(__name__)

MAX_TOKENS = 1_500  # all of one message's group context
MAX_LINE_CHARS = 600  # one message of it (longer ones are cut, marked with an ellipsis)


class GroupContextBook:
    def __init__(self, group_context: GroupContext) -> None:
        self._group_context = group_context

    async def keep(self, msg: InboundMessage, section: ChannelSection) -> None:
        """Store an unaddressed group message of an allowed sender (text only: its files
        were never fetched for a turn)."""
        if section.group_context_messages <= 0 or not msg.is_group:
            return
        forwards = [f"[forwarded from {s.author or 'someone'}] {s.text}" for s in msg.forwarded]
        text = "\n".join([msg.text, *forwards]).strip()
        if not text and msg.attachments:
            text = ", ".join(f"[{a.kind}: {a.filename or a.kind}]" for a in msg.attachments)
        if not text or msg.command is not None:
            return
        await self._group_context.keep(
            channel=msg.channel,
            chat_key=msg.session_key,
            platform_id=msg.platform_message_id,
            author=msg.sender_name or msg.sender_id,
            text=text,
            at=msg.received_at.timestamp(),
        )

    async def attach(
        self, msg: InboundMessage, section: ChannelSection
    ) -> tuple[InboundMessage, int | None]:
        """``msg`` with the group's kept messages as its context, and the id to forget up
        to once it is journaled (``None``: nothing attached)."""
        if section.group_context_messages <= 0 or not msg.is_group:
            return msg, None
        heard = await self._group_context.recent(msg.session_key, section.group_context_messages)
        heard = [h for h in heard if h.at <= msg.received_at.timestamp() + 1]
        if not heard:
            return msg, None
        lines: list[Said] = []
        budget = MAX_TOKENS
        for row in reversed(heard):  # the newest matter most: keep them when cutting
            text = row.text if len(row.text) <= MAX_LINE_CHARS else row.text[:MAX_LINE_CHARS] + "…"
            cost = estimate(f"{row.author}: {text}") + 4
            if cost > budget:
                break
            budget -= cost
            lines.append(Said(row.author, text, at=row.at))
        lines.reverse()
        return replace(msg, context=tuple(lines)), heard[-1].id

    async def forget(self, msg: InboundMessage, up_to: int) -> None:
        """Drop what went with ``msg`` (journaled by now). A failure here must not withhold
        the platform's acknowledgement of a journaled message: the context would only go
        along once more, with the next message."""
        try:
            await self._group_context.forget(msg.session_key, up_to)
        except Exception as exc:
            log.warning("group context of %s kept after its message: %s", msg.session_key, exc)
