"""Messages with buttons (approval requests) and the interactions a press makes.

A message with ``actions`` is sent with one row of button components whose ``custom_id`` is
each action's command (``/approve K7QW2M9P``, well under Discord's 100 characters). The
buttons are described with a ``discord.ui.View`` that is stopped before sending, so
discord.py only serialises it and never dispatches presses to it: a press arrives as
``INTERACTION_CREATE`` and is handled like a message (:func:`convert_press`), journaled, and
only then answered. The answer (a deferred update, or, pressed by the DM's own recipient, an
update that takes the buttons off) stops Discord's "interaction failed".

``direct`` messages are addressed by user id: the DM channel is opened first
(``POST /users/@me/channels``, which returns the existing one).
"""

from __future__ import annotations

import logging
from typing import Any

import discord

from channels.discord.convert import CHANNEL
from channels.discord.render import ALLOWED_MENTIONS, render
from channels.discord.sender import mapped_errors
from gateway.core.messages import ChatType, InboundMessage, OutboundMessage

log = logging.getLogger(__name__)

MAX_CUSTOM_ID = 100
_STYLES = {"primary": discord.ButtonStyle.success, "danger": discord.ButtonStyle.danger}


def view(message: OutboundMessage) -> discord.ui.View:
    buttons = discord.ui.View(timeout=None)
    for action in message.actions:
        buttons.add_item(
            discord.ui.Button(
                label=action.label,
                custom_id=action.command[:MAX_CUSTOM_ID],
                style=_STYLES.get(action.style, discord.ButtonStyle.secondary),
            )
        )
    buttons.stop()  # only serialised: presses come in as interactions we handle ourselves
    return buttons


async def send_with_buttons(client: discord.Client, message: OutboundMessage) -> str | None:
    """Send ``message`` with its buttons under the last part; returns the message ids."""
    with mapped_errors():
        if message.direct:
            target: discord.abc.Messageable = await client.create_dm(
                discord.Object(id=int(message.chat_id))
            )
        else:
            target = client.get_partial_messageable(int(message.thread_id or message.chat_id))
        parts = render(message.text)
        sent = []
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            posted = await target.send(
                content=part.content,
                view=view(message) if last else discord.utils.MISSING,
                allowed_mentions=ALLOWED_MENTIONS,
                suppress_embeds=True,
            )
            sent.append(posted.id)
    return ",".join(str(i) for i in sent) or None


def convert_press(interaction: discord.Interaction) -> InboundMessage | None:
    """A press of one of our buttons as the presser's own message: the button's command, in
    the chat the buttons are in (the presser's snowflake, as for every message)."""
    data: dict[str, Any] = dict(interaction.data or {})
    custom_id = data.get("custom_id")
    if interaction.type is not discord.InteractionType.component or not custom_id:
        return None
    if interaction.user is None or interaction.channel_id is None:
        return None
    direct = interaction.guild_id is None
    return InboundMessage(
        channel=CHANNEL,
        chat_id=str(interaction.channel_id),
        sender_id=str(interaction.user.id),
        sender_name=interaction.user.display_name,
        text=str(custom_id),
        platform_message_id=f"interaction:{interaction.id}",  # one per press
        chat_type=ChatType.DM if direct else ChatType.GROUP,
        mentioned=True,
    )


async def acknowledge(interaction: discord.Interaction) -> None:
    """Answer the press (Discord waits 3 s for it); pressed in a DM by its recipient (who
    decides it), take the buttons off."""
    channel = interaction.channel
    own_dm = (
        isinstance(channel, discord.DMChannel)
        and channel.recipient is not None
        and channel.recipient.id == interaction.user.id
    )
    try:
        if own_dm:
            await interaction.response.edit_message(view=None, suppress_embeds=True)
        else:
            await interaction.response.defer()
    except (discord.HTTPException, discord.InteractionResponded) as exc:
        # cosmetic: the press is journaled and is answered in the chat
        log.info("discord: could not answer the press %s: %s", interaction.id, exc)
