"""A turn shown live in its chat while it runs, for channels that can.

Streaming channels (the web chat, the terminal) get the answer's text as the model writes
it; channels that stream by editing (Telegram, Discord, Slack) get it through the
:class:`DraftStreamer`, where streaming is on for the chat; channels that show activity (the terminal) hear when a turn starts, whether it resumes
one a stop or crash cut short, and the name of each tool just before it runs. All of it is
cosmetic: the outbox's message stays the answer, and a display failure never fails a turn.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace

from agent.llm.base import TextSink
from agent.turn.inputs import ToolSink
from agent.turn.request import TurnRequest
from gateway.core.channel import Channel, SupportsActivity, SupportsStreaming, TurnActivity
from gateway.runtime.drafts import DraftStreamer

log = logging.getLogger(__name__)


async def watch_turn(
    channels: Mapping[str, Channel], request: TurnRequest, *, drafts: DraftStreamer | None = None
) -> TurnRequest:
    """``request`` with ``on_text`` and ``on_tool`` wired to its chat's channel; tells a
    channel that shows activity that the turn starts."""
    chat, turn_id = request.chat, request.turn_id
    channel: object = channels.get(chat.channel)  # mypy cannot intersect two protocols
    on_text: TextSink | None = None
    on_tool: ToolSink | None = None
    last = request.last_message
    if drafts is not None and last is not None:
        sinks = drafts.sinks(
            chat,
            turn_id,
            group=last.is_group,
            reply_to=last.platform_message_id if last.is_group else None,
        )
        if sinks is not None:
            on_text, on_tool = sinks
    if isinstance(channel, SupportsStreaming):
        streaming = channel

        async def forward(delta: str) -> None:
            await streaming.stream(chat, turn_id, delta)

        on_text = forward
    if isinstance(channel, SupportsActivity):
        showing = channel

        async def show(activity: TurnActivity) -> None:
            try:
                await showing.activity(chat, turn_id, activity)
            except Exception as exc:
                log.debug("activity display failed on %s: %s", chat.channel, exc)

        async def tool(name: str) -> None:
            await show(TurnActivity("tool", name))

        ids = tuple(m.platform_message_id for m in request.messages)
        await show(TurnActivity("started", last.text if last else "", request.resumed, ids))
        on_tool = tool
    return replace(request, on_text=on_text, on_tool=on_tool)
