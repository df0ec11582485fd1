"""Messages with buttons (approval requests) and ``block_actions`` when one is pressed.

A message with ``actions`` is posted with Block Kit: its text in ``section`` blocks and one
``actions`` block of buttons, each carrying its command (``/approve K7QW2M9P``) as ``value``;
``text`` stays as the notification fallback. A press comes back as a ``block_actions``
interaction (Socket Mode envelope, or a signed HTTP request that bolt verifies); it is
converted into that command from the presser (:func:`convert_press`), journaled, and only
then acknowledged, like every event. In a DM (where only its one member can press) the
buttons are then taken off (:func:`clear_buttons`). The decision itself is the gateway's: it
answers in the chat.

``direct`` messages are posted with the person's user id as ``channel``: Slack delivers
them to the app's direct messages with that person.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.errors import SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from channels.slack.convert import CHANNEL
from channels.slack.render import NO_UNFURL, render_message
from channels.slack.sender import EVENT_TYPE, mapped_errors
from gateway.core.messages import ChatType, InboundMessage, OutboundMessage

log = logging.getLogger(__name__)

ACTION_PREFIX = "switchboard:"  # action_id of our buttons; bolt routes presses by it
SECTION_LIMIT = 3_000  # characters per section block (Slack's limit)
SECTION_CHUNK = 2_800  # what we put in one: mrkdwn may come out a little longer


def blocks(message: OutboundMessage) -> list[dict[str, Any]]:
    sections: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": part}}
        for part in render_message(message, limit=SECTION_CHUNK)
    ]
    buttons = []
    for index, action in enumerate(message.actions):
        button: dict[str, Any] = {
            "type": "button",
            "action_id": f"{ACTION_PREFIX}{index}",
            "text": {"type": "plain_text", "text": action.label},
            "value": action.command,
        }
        if action.style in ("primary", "danger"):
            button["style"] = action.style
        buttons.append(button)
    return [*sections, {"type": "actions", "elements": buttons}]


async def send_with_buttons(client: AsyncWebClient, message: OutboundMessage) -> str | None:
    with mapped_errors(unsure_possible=False):
        response = await client.chat_postMessage(
            channel=message.chat_id,
            thread_ts=message.thread_id,
            text=message.text[:SECTION_LIMIT],
            blocks=blocks(message),
            metadata={  # found again after a crash (channels/slack/sender.py)
                "event_type": EVENT_TYPE,
                "event_payload": {"part": f"{message.idempotency_key}:0"},
            },
            **NO_UNFURL,
        )
    return str(response.get("ts") or "") or None


def convert_press(body: dict[str, Any], action: dict[str, Any]) -> InboundMessage | None:
    """A button press as the presser's own message: the button's command, in the chat the
    message with the buttons is in (the presser's user id, as for every message)."""
    user = body.get("user") or {}
    container = body.get("container") or {}
    channel = (body.get("channel") or {}).get("id") or container.get("channel_id")
    value = action.get("value")
    if not user.get("id") or not channel or not value:
        return None
    chat_type = ChatType.DM if str(channel).startswith("D") else ChatType.GROUP
    pressed = action.get("action_ts") or body.get("trigger_id") or ""
    return InboundMessage(
        channel=CHANNEL,
        chat_id=str(channel),
        sender_id=str(user["id"]),
        sender_name=str(user.get("name") or user.get("username") or ""),
        text=str(value),
        platform_message_id=f"press:{channel}:{container.get('message_ts')}:{pressed}",
        chat_type=chat_type,
        mentioned=True,
        thread_id=container.get("thread_ts") if chat_type is not ChatType.DM else None,
    )


async def clear_buttons(client: AsyncWebClient, body: dict[str, Any]) -> None:
    """Take the buttons off a message pressed in a DM: keep its text blocks. Cosmetic."""
    container = body.get("container") or {}
    channel, ts = container.get("channel_id"), container.get("message_ts")
    message = body.get("message") or {}
    if not channel or not ts or not str(channel).startswith("D"):
        return
    kept = [b for b in message.get("blocks") or [] if b.get("type") != "actions"]
    try:
        await client.chat_update(
            channel=channel, ts=ts, text=message.get("text") or "", blocks=kept, **NO_UNFURL
        )
    except (SlackClientError, OSError) as exc:
        log.info("slack: could not take the buttons off %s: %s", ts, exc)
