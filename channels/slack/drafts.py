"""Answers streamed by editing on Slack: a draft message updated as the answer grows.

``chat.update`` is a Tier 3 method (about 50 a minute); the gateway updates a chat's draft
at most once a second (:data:`DRAFT_INTERVAL`). Drafts go through the same mrkdwn
conversion as answers, so a half-written answer cannot turn into a mention or a link either.
The final answer is delivered by :meth:`channels.slack.sender.Sender.send` with the drafts'
timestamps: it updates them to its parts, posts the rest and deletes drafts left over.
"""

from __future__ import annotations

from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from channels._text import split_message
from channels.slack.buttons import blocks
from channels.slack.render import CHUNK, NO_UNFURL, render
from channels.slack.sender import DRAFT_TYPE, mapped_errors
from gateway.core.messages import Action, ChatRef, OutboundMessage

DRAFT_INTERVAL = 1.0  # seconds between updates of a chat's draft
STOP = Action("Stop", "/stop", style="danger")


def parts(text: str) -> list[str]:
    return split_message(text, CHUNK)


def _shown(text: str) -> str:
    return "\n".join(render(text, limit=CHUNK * 2)) or text


def _with_stop(chat: ChatRef, shown: str) -> list[dict[str, Any]]:
    """The draft's text with a Stop button under it (a press sends /stop from the presser,
    whom the gateway checks; the final answer's update takes the button away)."""
    draft = OutboundMessage(chat.channel, chat.chat_id, shown, actions=(STOP,))
    return blocks(draft)


async def post(client: AsyncWebClient, chat: ChatRef, text: str) -> str:
    """Post a draft, marked as one in its metadata: after a crash that lost its ts, the
    history shows it is ours (channels/slack/sender.py)."""
    shown = _shown(text)
    with mapped_errors(unsure_possible=False):
        response = await client.chat_postMessage(
            channel=chat.chat_id,
            text=shown,
            thread_ts=chat.thread_id,
            blocks=_with_stop(chat, shown),
            metadata={"event_type": DRAFT_TYPE, "event_payload": {}},
            **NO_UNFURL,
        )
    return str(response.get("ts") or "")


async def edit(client: AsyncWebClient, chat: ChatRef, ts: str, text: str) -> None:
    shown = _shown(text)
    with mapped_errors(unsure_possible=False):
        await client.chat_update(
            channel=chat.chat_id, ts=ts, text=shown, blocks=_with_stop(chat, shown), **NO_UNFURL
        )
